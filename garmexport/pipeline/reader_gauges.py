"""The reader's gauges: a snapshot of its partitions and of the writers it knows of.

Set after every assignment change and pause (partitions) and on every tick (writers), from
the reader's state; the metrics object is passed in at each call, never kept.
"""

from __future__ import annotations

from collections.abc import Mapping

from garmexport.observe.metrics import Metrics
from garmexport.pipeline.reader_state import Assigned


def set_partition_gauges(metrics: Metrics, assigned: Mapping[int, Assigned], paused: bool) -> None:
    """How many partitions are held, and how many are paused (all of them, or none)."""
    n = len(assigned)
    metrics.set_partitions(n, n if paused else 0)


def set_writer_gauges(metrics: Metrics, assigned: Mapping[int, Assigned], pending_bytes: int,
                      now: float) -> None:
    """Writers with open files, open files, bytes buffered or gathered for the writers
    (``pending_bytes``), and the age in seconds of the oldest open file."""
    views = [v for a in assigned.values() for v in a.writers.values()]
    oldest = min((v.oldest_open_s for v in views if v.oldest_open_s is not None), default=None)
    metrics.set_writers(
        sum(1 for v in views if v.open_files), sum(v.open_files for v in views),
        sum(v.buffered_bytes for v in views) + pending_bytes,
        0.0 if oldest is None else now - oldest)
