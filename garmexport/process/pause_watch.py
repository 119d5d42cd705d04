"""Noticing that the whole process was not scheduled: SIGSTOP, a long freeze, a VM pause.

Kafka's group coordinator drops a member whose heartbeats stop for the session timeout.
When the member's own process was stopped (SIGSTOP, a debugger, a frozen cgroup, a paused
VM), librdkafka then reports the partitions lost, which read like a broker that stopped
answering, though the broker was fine. A daemon thread wakes every ``PERIOD_S`` and
compares the wall time since its last wakeup (monotonic) with the process's CPU time
over the same span: a gap of at least ``MIN_GAP_S`` beyond the period during which the
process used almost no CPU (:func:`unscheduled_s`) means no thread of it ran, which a
busy machine or a held GIL alone do not explain (those leave CPU time running). The
last such pause is kept for whoever explains a lost session, and the span since the last
wakeup is judged again when asked: after a resume, librdkafka's report of the lost
session may be served before the watch's thread runs.

The rule is pure (:func:`unscheduled_s`, :class:`Pauses`); :class:`PauseWatch` is the
thread around it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

PERIOD_S = 0.25
#: a wakeup this much later than due may just be a loaded machine
MIN_GAP_S = 2.0
#: CPU time the process may have used over the gap and still count as not scheduled
#: (its threads ran for a moment before the stop and after the resume)
CPU_SHARE = 0.25


def unscheduled_s(wall_s: float, cpu_s: float, period_s: float = PERIOD_S) -> float | None:
    """Seconds the process was not scheduled, if a wakeup ``wall_s`` after the previous
    one (planned ``period_s`` after it) with ``cpu_s`` of process CPU time between them
    shows a pause; else None."""
    gap = wall_s - period_s
    if gap >= MIN_GAP_S and cpu_s <= CPU_SHARE * gap:
        return gap
    return None


@dataclass(frozen=True)
class Pause:
    seconds: float
    ended_at: float  # monotonic seconds


class Pauses:
    """The wakeups of the watch and the last pause they showed. :meth:`wakeup` is the
    watch's, :meth:`recent` anyone's (the same span is also judged at that moment: after a
    resume, the thread that asks may run before the watch does). Pure: times passed in."""

    def __init__(self, wall: float, cpu: float, period_s: float = PERIOD_S) -> None:
        self._wall, self._cpu, self._period_s = wall, cpu, period_s
        self.last: Pause | None = None

    def wakeup(self, wall: float, cpu: float) -> None:
        self._judge(wall, cpu)
        self._wall, self._cpu = wall, cpu

    def recent(self, wall: float, cpu: float, within_s: float) -> Pause | None:
        """The last pause, if it ended at most ``within_s`` before ``wall`` (the span since
        the last wakeup included)."""
        self._judge(wall, cpu)
        if self.last is not None and wall - self.last.ended_at <= within_s:
            return self.last
        return None

    def _judge(self, wall: float, cpu: float) -> None:
        gap = unscheduled_s(wall - self._wall, cpu - self._cpu, self._period_s)
        if gap is not None and (self.last is None or self.last.ended_at < self._wall):
            self.last = Pause(gap, wall)


class PauseWatch:
    """The daemon thread that wakes :class:`Pauses` (start once, stop at close)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 cpu: Callable[[], float] = time.process_time) -> None:
        self._clock, self._cpu = clock, cpu
        self._pauses = Pauses(clock(), cpu())
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pause-watch", daemon=True)

    def start(self) -> PauseWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def recent(self, within_s: float) -> Pause | None:
        """A pause of the process that ended at most ``within_s`` ago, or None."""
        with self._lock:
            return self._pauses.recent(self._clock(), self._cpu(), within_s)

    def _run(self) -> None:
        while not self._stop.wait(PERIOD_S):
            with self._lock:
                self._pauses.wakeup(self._clock(), self._cpu())
