"""Lag in seconds of one partition: how old the oldest record not yet committed is.

Definition (also in ``config/METRICS.md``), with S the committed seek position (min over
types of W + 1, what a restart would read first) and H the high watermark of the last
fetch:

- 0 when S >= H: nothing waits, however old the newest record is (a quiet partition);
- otherwise ``now - T(S)``, where T(S) is the Kafka timestamp of the record at S, never
  below 0. Until a fetch has shown H (just after an assignment), the watermark queried
  at the assignment stands in for it; if that query failed too (H unknown), the
  partition counts as waiting.

T(S) is estimated from :class:`PositionTimes`, a few (offset, Kafka time) samples: the
first and last record of every poll of the partition, at most one a second of Kafka time,
halved in resolution past :data:`MAX_SAMPLES`. T(S) is the time of the last sample at or
below S, so the lag errs on the high side by at most the Kafka-time span of one poll's
records (plus a second). Before any record is read, the newest marker's processed
position and its Kafka time (``low_event_ms``) stand in: the record at S is no newer, so
the lag errs on the low side until the first poll. A partition without a marker that has
read nothing yet is timed from its assignment.

Pure: the caller passes offsets, Kafka times and ``now``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

from garmexport.protocol.resume import Marker

#: samples closer than this in Kafka time add nothing
SAMPLE_EVERY_MS = 1000
#: past this many samples every other one is dropped (a long catch-up with open files)
MAX_SAMPLES = 1024


class PositionTimes:
    """(offset, Kafka time) samples of one partition, in offset order."""

    def __init__(self, fallback_ms: int) -> None:
        """``fallback_ms``: T of any offset while no sample exists (the assignment time)."""
        self._fallback_ms = fallback_ms
        self._offsets: list[int] = []
        self._times: list[int] = []

    @staticmethod
    def start(markers: Iterable[Marker], assigned_ms: int) -> PositionTimes:
        """Samples at assignment: the newest marker's processed position and its Kafka
        time, when it stores one (markers of older versions do not)."""
        times = PositionTimes(assigned_ms)
        newest = max(markers, key=lambda m: m.processed, default=None)
        if newest is not None and newest.low_event_ms is not None:
            times.seen(newest.processed, newest.low_event_ms)
        return times

    def seen(self, offset: int, kafka_ms: int) -> None:
        """The record at ``offset`` has Kafka time ``kafka_ms`` (< 0: none, ignored).
        Samples at or past ``offset`` are dropped first: a seek back re-reads them."""
        if kafka_ms < 0:
            return
        cut = bisect_right(self._offsets, offset - 1)
        del self._offsets[cut:], self._times[cut:]
        if self._times and kafka_ms < self._times[-1] + SAMPLE_EVERY_MS:
            return
        self._offsets.append(offset)
        self._times.append(kafka_ms)
        if len(self._offsets) > MAX_SAMPLES:
            self._offsets = self._offsets[:-1:2] + self._offsets[-1:]
            self._times = self._times[:-1:2] + self._times[-1:]

    def time_at(self, offset: int) -> int:
        """T(offset): the time of the last sample at or below ``offset``, else of the
        first sample, else the fallback. Samples below that one are dropped (the
        position never moves back but by a seek, and a seek re-reads)."""
        if not self._offsets:
            return self._fallback_ms
        i = bisect_right(self._offsets, offset) - 1
        if i <= 0:
            return self._times[0]
        del self._offsets[:i], self._times[:i]
        return self._times[0]

    def __len__(self) -> int:
        return len(self._offsets)


def waiting(position: int, high_watermark: int | None) -> bool:
    """Whether records wait at or past ``position`` (unknown watermark: assume so)."""
    return high_watermark is None or position < high_watermark


def lag_seconds(is_waiting: bool, oldest_ms: int, now_s: float) -> float:
    """0 when nothing waits, else the age of the oldest waiting record (never below 0)."""
    return max(0.0, now_s - oldest_ms / 1000.0) if is_waiting else 0.0
