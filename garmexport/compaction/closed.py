"""When is a day closed: the event-time rule for compaction (pure; time is an argument).

Rule implemented::

    progress(P) = max over P's markers of low_event_ms    when any marker carries it
                  else max over P's markers of written_at_ms
    horizon     = min(now_ms, min over every partition P of every feed of progress(P))
    day D is closed  <=>  end of D (start of D+1, UTC, ms) + lateness_s * 1000 <= horizon

``low_event_ms`` (optional marker field) is the event time up to which the partition's
processed position has advanced; it is the right clock: a partition that is far behind
(lagging consumer, stopped exporter) holds every day back, because it may still deliver
events of old days. Markers without it fall back to ``written_at_ms``, the wall clock of
the marker write: heartbeats advance it while the exporter runs, and a stopped or stuck
partition stops advancing it, so closing still waits for the slowest partition; but a
consumer that runs yet lags in event time is then only bounded by the lateness delay
(choose it larger than the worst lag you accept). ``now_ms`` caps the horizon so a skewed
clock in a marker never closes a day early.

Not closed at all: a root with no markers (nothing is known about the partitions, and no
file can be proven committed anyway). A partition the exporter has never written a marker
for (no data yet) cannot hold days back: it is unknown here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from garmexport.protocol.naming import MS_PER_DAY


@dataclass(frozen=True)
class PartitionProgress:
    """Time facts of one partition's markers (epoch ms; None when no marker gave it)."""

    low_event_ms: int | None
    written_at_ms: int | None

    def progress_ms(self) -> int | None:
        return self.low_event_ms if self.low_event_ms is not None else self.written_at_ms


def horizon_ms(progress: Iterable[PartitionProgress], now_ms: int) -> int | None:
    """min(now, slowest partition's progress); None when there is no partition or one has
    no time at all (conservative: nothing is closed)."""
    times = [p.progress_ms() for p in progress]
    if not times or any(t is None for t in times):
        return None
    return min([now_ms, *(t for t in times if t is not None)])


def last_closed_day(progress: Iterable[PartitionProgress], now_ms: int,
                    lateness_s: float) -> int | None:
    """The largest day number (days since 1970-01-01 UTC) that is closed, or None.

    Every day <= the result is closed too. Day D ends at (D + 1) * MS_PER_DAY (exclusive).
    """
    horizon = horizon_ms(progress, now_ms)
    if horizon is None:
        return None
    limit = horizon - int(round(lateness_s * 1000))
    # (D + 1) * MS_PER_DAY <= limit  <=>  D <= floor(limit / MS_PER_DAY) - 1
    return limit // MS_PER_DAY - 1


def is_closed(day_number: int, last_closed: int | None) -> bool:
    return last_closed is not None and day_number <= last_closed
