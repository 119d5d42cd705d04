"""When a Kerberos ticket must be renewed: a pure rule, time as an argument.

A ticket is known by when garmexport last obtained or renewed it and when it ends (both
in wall-clock seconds: Kerberos times are wall-clock). It is renewed when any of these
holds:

- there is none yet;
- ``renew_s`` passed since it was obtained (the configured rhythm);
- 80 % of its lifetime passed (a ticket shorter than ``renew_s`` is still renewed in
  time, with a fifth of its life left for a KDC that answers slowly; the same window as
  Hadoop's own clients use).

After a failed attempt the next one waits ``retry_s``, so an unreachable KDC is not asked
on every storage call; while the old ticket is still valid the caller keeps using it.
"""

from __future__ import annotations

import dataclasses

RENEW_WINDOW = 0.8  # share of a ticket's lifetime after which it is renewed


@dataclasses.dataclass(frozen=True)
class Ticket:
    obtained_s: float  # when garmexport obtained or last renewed it
    expires_s: float   # when it ends


def renewal_due(now_s: float, ticket: Ticket | None, renew_s: float,
                last_failure_s: float | None = None, retry_s: float = 30.0) -> bool:
    """Whether to (re)new the ticket at ``now_s``."""
    if last_failure_s is not None and now_s - last_failure_s < retry_s:
        return False
    if ticket is None:
        return True
    lifetime = ticket.expires_s - ticket.obtained_s
    return (now_s - ticket.obtained_s >= renew_s
            or now_s - ticket.obtained_s >= RENEW_WINDOW * lifetime)


def usable(now_s: float, ticket: Ticket | None) -> bool:
    """Whether ``ticket`` can still authenticate at ``now_s``."""
    return ticket is not None and ticket.expires_s > now_s
