"""Whether the Kafka broker is reachable, decided from what the client reports.

librdkafka has no "connected again" callback, so the state is kept from three signals:

- ``_ALL_BROKERS_DOWN`` (error callback): no connection to any broker is up. Cleared when
  the client's statistics show a broker connection ``UP`` again, or by an assignment.
  (A single ``_TRANSPORT`` error is not enough: with several brokers, one closed
  connection says nothing of the others, and librdkafka sends ``_ALL_BROKERS_DOWN`` right
  after the last one fails.)
- lost partitions (the group session expired: the broker did not answer heartbeats,
  e.g. frozen or partitioned away while its connections stay open). Cleared only by the
  next assignment: only a rejoin proves the group coordinator answers again.
- an assignment: the group coordinator answered, so every condition is cleared.

:class:`BrokerLink` is pure: each method returns the transition it caused, if any, and the
caller logs it and tells readiness. ``now`` is monotonic seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSPORT, GROUP = "transport", "group"


@dataclass(frozen=True)
class Change:
    """A transition: ``reachable`` now; ``reason`` why not (when not); ``down_s`` how long
    it was unreachable (when back)."""

    reachable: bool
    reason: str = ""
    down_s: float = 0.0


class BrokerLink:
    def __init__(self) -> None:
        self._down: dict[str, str] = {}  # condition -> reason, in the order they arose
        self._since = 0.0

    @property
    def problem(self) -> str:
        """Why the broker counts as unreachable ("" while it is reachable)."""
        return "; ".join(self._down.values())

    def all_brokers_down(self, reason: str, now: float) -> Change | None:
        return self._raise(TRANSPORT, reason, now)

    def partitions_lost(self, reason: str, now: float) -> Change | None:
        return self._raise(GROUP, reason, now)

    def connection_up(self, now: float) -> Change | None:
        """Some broker connection is up: clears ``_ALL_BROKERS_DOWN``, not a lost group."""
        return self._clear((TRANSPORT,), now)

    def assigned(self, now: float) -> Change | None:
        return self._clear((TRANSPORT, GROUP), now)

    @property
    def waits_for_connection(self) -> bool:
        """Whether a connection coming up would change anything (statistics worth reading)."""
        return TRANSPORT in self._down

    def _raise(self, condition: str, reason: str, now: float) -> Change | None:
        was_reachable = not self._down
        self._down.setdefault(condition, reason)
        if was_reachable:
            self._since = now
            return Change(False, reason)
        return None

    def _clear(self, conditions: tuple[str, ...], now: float) -> Change | None:
        if not self._down:
            return None
        for condition in conditions:
            self._down.pop(condition, None)
        return None if self._down else Change(True, down_s=max(0.0, now - self._since))
