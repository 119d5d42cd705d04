"""Writing the markers that are due, and deleting what they make redundant (I/O).

For each assigned partition whose :class:`~garmexport.protocol.marker_keeper.MarkerKeeper` says a
marker is due, the ledger's marker is published under a name unique to this instance;
then markers it dominates and intents it covers are deleted (a failed delete only leaves
garbage for the next marker). After a failed write, no marker is tried before a back-off:
each attempt at a failing store can block for seconds (backend retries), and the writers'
failure reports, which pause the partitions, wait behind this call. Final markers at a
clean stop are always attempted. After ``storage.retry_attempts`` failed writes in a row
StoreGaveUp propagates, naming the marker: the process exits 1, as for data files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from garmexport.protocol.commit_steps import INTENT_GC, MARKER, MARKER_GC
from garmexport.settings.config import Config
from garmexport.pipeline.crash_points import crash_point
from garmexport.protocol.backoff import Backoff
from garmexport.errors import StorageError, StoreGaveUp
from garmexport.observe.logs import log_event
from garmexport.observe.metrics import Metrics
from garmexport.protocol.naming import MarkerName, partition_dir
from garmexport.pipeline.publisher import write_marker
from garmexport.pipeline.reader_state import Assigned
from garmexport.storage.base import Storage

log = logging.getLogger(__name__)


class MarkerWriter:
    def __init__(self, config: Config, instance: str, storage: Storage, metrics: Metrics,
                 clock: Callable[[], float], wall_ms: Callable[[], int]) -> None:
        self.cfg, self.instance, self.storage, self.metrics = config, instance, storage, metrics
        self._clock, self._wall_ms = clock, wall_ms
        self._counter = 0
        self._retries = Backoff(config.storage.retry_initial_s, config.storage.retry_max_s)
        #: "<exception class>: <message>" of the last failed write, "" once one works again
        self.error = ""

    @property
    def failing(self) -> bool:
        """The last marker write failed (and the next waits for its back-off)."""
        return self._retries.failures > 0

    def write_due(self, partitions: Mapping[int, Assigned], now: float,
                  force: bool = False) -> None:
        """Write the markers due; the partitions' state learns what was written and
        deleted through its own methods."""
        src = self.cfg.source
        if not force and self._retries.waiting(now):
            return
        for p, a in partitions.items():
            if not a.keeper.due(a.ledger, now, force):
                continue
            heartbeat = not a.keeper.published_since
            # the marker to write now (the ledger forgets per-day offsets it no longer needs)
            marker = a.ledger.marker(self._wall_ms())
            self._counter += 1
            name = MarkerName(self.instance, self._counter)
            try:
                write_marker(self.storage, src.cluster, src.topic, name, marker)
            except StorageError as exc:
                self.metrics.storage_failure("marker")
                self.error = f"{type(exc).__name__}: {exc}"
                failures = self._retries.failed(self._clock())
                if failures >= self.cfg.storage.retry_attempts:
                    path = f"{partition_dir(src.cluster, src.topic, p)}/{name.format()}"
                    raise StoreGaveUp(failures, "marker write", path, self.error) from exc
                self.metrics.storage_retry("marker")
                if failures == 1:  # one line per run of failures, not per attempt
                    log_event(log, "marker_failed", level=logging.WARNING, partition=p,
                              error=self.error)
                return
            self._retries.succeeded()
            self.error = ""
            crash_point(MARKER)
            old, covered = a.marker_written(name, marker, now)
            self.metrics.marker_written(p, heartbeat)
            for origin, w in marker.low.items():
                self.metrics.set_watermark(origin, p, w)
            pdir = partition_dir(src.cluster, src.topic, p)
            try:
                for n in old:
                    self.storage.delete(f"{pdir}/{n.format()}")
                    crash_point(MARKER_GC)
                for i in covered:
                    self.storage.delete(f"{pdir}/{i.format()}")
                    crash_point(INTENT_GC)
            except StorageError:
                continue  # garbage stays until the next marker; harmless
            a.garbage_deleted(old, covered)
