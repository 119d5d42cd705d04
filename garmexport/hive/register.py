"""Register each new day's Hive partition as data lands, off the export's hot path.

The reader hands over what writers published (:meth:`Registrar.offer`: a set lookup and a
``put_nowait`` on a bounded queue, never I/O); a background thread does the metastore work:

- what to register is a pure rule (:func:`wanted`): the (dataset, day) of a data or
  quarantine file not offered before by this process;
- new partitions are gathered for ``hive.register_delay_s`` after the oldest one arrived,
  then registered in one round per table: the table is created when missing and gains the
  columns of this version's schema (:mod:`garmexport.hive.tables`, the rules ``compact``
  uses too), then the partitions are added IF NOT EXISTS;
- a failed round keeps everything pending and is retried after a doubling back-off capped
  at ``hive.retry_max_s``; the export goes on meanwhile, and nothing is lost;
- every step is idempotent, so several instances, restarts and ``compact`` may register
  the same day: each partition exists once;
- a table found missing when partitions are added (dropped by an operator, a metastore
  restored from an older backup) is made again in the same round, with every day this
  process has registered in it (days of earlier processes: ``compact`` registers them);
- a full queue drops the offer without marking it offered: the next file of that day
  offers it again.

On stop, what is pending is tried once more at once. A partition whose only files were
published just before a crash is registered by ``compact`` (or the next file of its day).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from garmexport.settings.config import Config, HiveConfig
from garmexport.errors import MetastoreError, TableMissing
from garmexport.protocol.backoff import Backoff
from garmexport.hive.tables import (TableNaming, columns_of, dataset_schema, new_columns,
                                    partition_location, table_location)
from garmexport.observe.logs import log_event
from garmexport.observe.metrics import Metrics
from garmexport.protocol.naming import QUARANTINE, QUARANTINE_DIR
from garmexport.storage.hadoop_uri import spark_root

log = logging.getLogger(__name__)
RETRY_INITIAL_S = 1.0


class MetastorePort(Protocol):
    """What registration needs of a metastore (:class:`garmexport.hive.metastore.Metastore`);
    every method raises MetastoreError on failure."""

    def ensure_database(self, database: str) -> None: ...
    def columns(self, database: str, table: str) -> list[tuple[str, str]] | None: ...
    def create_table(self, database: str, table: str, columns: Sequence[tuple[str, str]],
                     location: str) -> None: ...
    def add_columns(self, database: str, table: str,
                    columns: Sequence[tuple[str, str]]) -> None: ...
    def add_partitions(self, database: str, table: str,
                       days: Sequence[tuple[str, str]]) -> None: ...
    def close(self) -> None: ...


def wanted(origin: str, published: Iterable[tuple[str, str]], offered: set[tuple[str, str]]
           ) -> list[tuple[str, str]]:
    """(dataset, day) pairs of ``published`` (kind, day) files of writer ``origin`` that are
    not in ``offered``, first appearance first. Quarantine files belong to ``_quarantine``."""
    out: list[tuple[str, str]] = []
    for kind, day in published:
        key = (QUARANTINE_DIR if kind == QUARANTINE else origin, day)
        if key not in offered and key not in out:
            out.append(key)
    return out


def due_in(oldest_s: float | None, retry_at_s: float, delay_s: float, now_s: float) -> float | None:
    """Seconds until the next round (<= 0: now); None when nothing is pending."""
    if oldest_s is None:
        return None
    return max(oldest_s + delay_s, retry_at_s) - now_s


def start_registrar(config: Config, metrics: Metrics) -> Registrar | None:
    """The running worker of ``config.hive``, or None when no metastore is configured."""
    hive = config.hive
    if not hive.metastore_uri:
        return None
    from garmexport.hive.metastore import Metastore

    log_event(log, "hive_registration_on", metastore=hive.metastore_uri,
              database=hive.database, register_delay_s=hive.register_delay_s)
    # the tables' locations as Hive and Spark read them: the same URI compaction uses
    root = spark_root(config.output.root, config.compaction.hadoop_root)
    return Registrar(hive, root, metrics,
                     lambda: Metastore(hive.metastore_uri, hive.timeout_s)).start()


class Registrar:
    """The registration worker of one exporter process (see the module docstring)."""

    def __init__(self, hive: HiveConfig, root_uri: str, metrics: Metrics,
                 connect: Callable[[], MetastorePort], clock: Callable[[], float] = time.monotonic,
                 queue_max: int = 10_000) -> None:
        self._naming = TableNaming.of(hive)
        self._delay_s, self._retry_max_s = hive.register_delay_s, hive.retry_max_s
        self._root, self._metrics, self._connect, self._clock = root_uri, metrics, connect, clock
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue(queue_max)
        self._offered: set[tuple[str, str]] = set()  # reader thread only
        self._pending: dict[tuple[str, str], float] = {}  # worker thread only
        self._tables_done: set[str] = set()  # worker thread only, as is the next
        #: days registered per output: added again when their table must be made again
        self._registered: dict[str, set[str]] = {}
        self._problem = ""
        self._thread = threading.Thread(target=self._run, name="hive-register", daemon=True)

    # -- reader thread ----------------------------------------------------------------------
    def offer(self, origin: str, published: Iterable[tuple[str, str]]) -> None:
        """Hand over the (kind, day) of files ``origin``'s writer published. Never blocks."""
        for key in wanted(origin, published, self._offered):
            try:
                self._queue.put_nowait(key)
            except queue.Full:
                return  # not marked offered: the day's next file offers it again
            self._offered.add(key)

    @property
    def problem(self) -> str:
        """Why registration is behind ('' when it is not), for the readiness detail."""
        return self._problem

    def start(self) -> Registrar:
        self._thread.start()
        return self

    def stop(self, timeout_s: float) -> None:
        """Try what is pending once more, then end the worker (waits ``timeout_s`` at most)."""
        self._queue.put(None)
        self._thread.join(timeout_s)

    # -- worker thread ----------------------------------------------------------------------
    def _run(self) -> None:
        backoff = Backoff(RETRY_INITIAL_S, self._retry_max_s, retry_at=0.0)
        store: MetastorePort | None = None
        stopping = False
        while True:
            now = self._clock()
            wait = due_in(min(self._pending.values(), default=None), backoff.retry_at, self._delay_s,
                          now)
            try:
                item = self._queue.get(timeout=None if wait is None else max(0.0, wait))
                while True:
                    if item is None:
                        stopping = True
                    else:
                        self._pending.setdefault(item, self._clock())
                    item = self._queue.get_nowait()
            except queue.Empty:
                pass
            now = self._clock()
            oldest = min(self._pending.values(), default=None)
            self._metrics.set_hive_pending(len(self._pending), 0.0 if oldest is None else now - oldest)
            left = due_in(oldest, backoff.retry_at, self._delay_s, now)
            if self._pending and (stopping or (left is not None and left <= 0)):
                try:
                    store = store or self._connect()
                    self._round(store)
                    backoff.succeeded()
                    self._problem = ""
                except Exception as exc:  # noqa: BLE001 - never let the worker die silently
                    if not isinstance(exc, MetastoreError):
                        log.exception("hive registration round raised")
                        store = None
                    failures = backoff.failed(self._clock())
                    self._problem = f"hive registration failing ({failures}x): {exc}"
                    self._metrics.hive_failure()
                    log_event(log, "hive_register_failed", level=logging.WARNING,
                              failures=failures, pending=len(self._pending), error=str(exc))
                oldest = min(self._pending.values(), default=None)
                self._metrics.set_hive_pending(
                    len(self._pending), 0.0 if oldest is None else self._clock() - oldest)
            if stopping:
                if store is not None:
                    store.close()
                return

    def _round(self, store: MetastorePort) -> None:
        """Register every pending partition, table by table; done ones leave ``_pending``."""
        db = self._naming.database
        if not self._tables_done:
            store.ensure_database(db)
        for output in sorted({o for o, _ in self._pending}):
            table = self._naming.table(output)
            added = 0
            if output not in self._tables_done:
                added = self._ensure_table(store, output, table)
                self._tables_done.add(output)
            days = sorted(d for o, d in self._pending if o == output)
            try:
                self._add(store, output, table, days)
            except TableMissing as gone:
                # dropped by an operator, or a metastore restored from an older backup:
                # make it again, with every day this process registered in it
                self._tables_done.discard(output)
                log_event(log, "hive_table_missing", level=logging.WARNING,
                          table=f"{db}.{table}", error=str(gone))
                store.ensure_database(db)
                added = self._ensure_table(store, output, table)
                self._tables_done.add(output)
                days = sorted(set(days) | self._registered.get(output, set()))
                self._add(store, output, table, days)
            for d in days:
                self._pending.pop((output, d), None)
            self._metrics.hive_registered(table, len(days), added)
            log_event(log, "hive_partitions_registered", table=f"{db}.{table}", days=days,
                      columns_added=added)

    def _add(self, store: MetastorePort, output: str, table: str, days: list[str]) -> None:
        store.add_partitions(self._naming.database, table,
                             [(d, partition_location(self._root, output, d)) for d in days])
        self._registered.setdefault(output, set()).update(days)

    def _ensure_table(self, store: MetastorePort, output: str, table: str) -> int:
        """Create the table or add the columns it lacks; the number of columns added."""
        db = self._naming.database
        data = columns_of([dataset_schema(output)])
        known = store.columns(db, table)
        if known is None:
            store.create_table(db, table, data, table_location(self._root, output))
            known = store.columns(db, table) or []
        added, changed = new_columns(known, data)
        if added:
            store.add_columns(db, table, added)
        if changed:
            log_event(log, "hive_column_type_changed", level=logging.WARNING,
                      table=f"{db}.{table}", columns=changed)
        return len(added)
