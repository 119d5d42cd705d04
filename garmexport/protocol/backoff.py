"""Back-off after storage failures: the one delay formula and the one failure state.

The n-th retry (n = 1, 2, ...) of a run of failures waits nominally
``d = min(max_s, initial_s * 2**(n-1))`` (the exponent is capped first, so a long run never
overflows a float). Callers that retry in a loop of their own (``storage/retry``) spread a
burst of failing callers with "equal jitter", a delay in ``[d/2, d]``; the exporter's
writers and its marker writer retry on their ticks and wait ``d``.

:class:`Backoff` is the state of one run of failures: of one writer, of the marker writer,
or shared by every writer of a store in a process (without it, an outage would cost each of
the many writers one full failing attempt, back to back, before the reader learns of it and
pauses). Pure: ``now`` is an argument, no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


def nominal_delay_s(retry_number: int, initial_s: float, max_s: float) -> float:
    """Delay before retry ``retry_number`` (1-based); ValueError below 1."""
    if retry_number < 1:
        raise ValueError(f"retry_number starts at 1, got {retry_number}")
    return min(max_s, initial_s * 2.0 ** min(retry_number - 1, 62))


def jittered_delay_s(retry_number: int, initial_s: float, max_s: float, unit: float) -> float:
    """The nominal delay scaled into ``[d/2, d]``; ``unit`` in [0, 1) picks the point."""
    nominal = nominal_delay_s(retry_number, initial_s, max_s)
    return nominal / 2.0 + unit * nominal / 2.0


@dataclass
class Backoff:
    """Failures in a row and when the next try may start (seconds of the caller's clock)."""

    initial_s: float
    max_s: float
    failures: int = 0
    retry_at: float = float("-inf")

    def failed(self, now: float) -> int:
        """Count a failure at ``now``: the next try waits the nominal delay. Returns the
        number of failures in a row."""
        self.failures += 1
        self.retry_at = now + nominal_delay_s(self.failures, self.initial_s, self.max_s)
        return self.failures

    def succeeded(self) -> None:
        """A try worked: the run of failures is over."""
        self.failures = 0

    def waiting(self, now: float) -> bool:
        """True while failing and the next try's time has not come."""
        return self.failures > 0 and now < self.retry_at
