"""Every Prometheus metric of garmexport, on one injected registry, in one vocabulary.

The exporter calls the typed methods of :class:`Metrics`; nothing else in the code base
imports ``prometheus_client`` for instrumentation. The registry is an argument, never the
global default, so each test builds a fresh one. ``config/METRICS.md`` is the table of
names, types, labels and meanings; ``tests/unit/shipped/test_dashboard.py`` keeps the alert rules
and the dashboard to these names.

Vocabulary: ``type`` is an output name (``fs``, ``jvm_gc``, ...) or ``_frame`` for records
that could not be routed to a type; ``partition`` is the Kafka partition number;
``topic`` the source topic; ``kind`` says which of a few fixed cases a sample counts.

Invariants:

- Offsets and times are those the caller passes: this module reads no state beyond the
  max it keeps for the two monotone per-(type, partition) gauges, and no clock but the
  injected wall clock that ages the lag in seconds at each scrape (so that it keeps
  growing while the exporter is stuck).
- Per-partition series are removed when the partition leaves this instance
  (:meth:`Metrics.forget_partition`), so a revoked partition never reports a stale lag.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, ProcessCollector

from garmexport import __version__
from garmexport.observe.exposition import Table
from garmexport.observe.lag_time import lag_seconds

PUBLISH_KINDS = ("data", "quarantine")
REBALANCE_KINDS = ("assign", "revoke", "lost")
RECOVERY_KINDS = ("start", "assign", "fence")
# Publishing a file is a few metadata operations plus an upload: 5 ms .. 2 min.
_PUBLISH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# Recovery lists _offsets/ and reads a few footers: 10 ms on a local disk .. minutes on HDFS.
_RECOVERY_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def _check(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"{what} {value!r} is not one of {allowed}")
    return value


class Metrics:
    """The metric families of one exporter process and the methods that update them."""

    def __init__(self, registry: CollectorRegistry, wall_s: Callable[[], float] = time.time) -> None:
        """Register every family on ``registry``; use :meth:`create`."""
        self._wall_s = wall_s
        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(f"garmexport_{name}", doc, labels, registry=registry)

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(f"garmexport_{name}", doc, labels, registry=registry)

        tp = ("type", "partition")

        def table(name: str, doc: str, kind: str) -> Table:
            # a (type, partition) family: 18 types x the partitions, most of a reader's
            # series, rendered from its values (garmexport.observe.exposition)
            return Table(f"garmexport_{name}", doc, tp, kind, registry, wall_s)

        self._consumed = counter("events_consumed", "Records polled from Kafka.", "topic", "partition")
        self._exported = counter("events_exported", "Events handed to a writer of their type.", "type")
        self._not_exported = counter(
            "events_not_exported", "Events of known types that are not exported.", "marker")
        self._already_committed = table(
            "events_already_committed", "Events skipped because a committed file holds them.",
            "counter")
        self._rows = counter("rows_published", "Rows in published files.", "type", "kind")
        self._files = counter("files_published", "Files published to their final name.", "type", "kind")
        self._bytes = counter("bytes_published", "Bytes of published files.", "type", "kind")
        self._publish_s = Histogram(
            "garmexport_publish_duration_seconds", "Time to publish one file (stage to final name).",
            ["kind"], buckets=_PUBLISH_BUCKETS, registry=registry)
        self._quarantined = counter("quarantined", "Records sent to quarantine.", "type", "reason")
        self._open_writers = gauge("open_writers", "Writers holding buffered or open data.")
        self._open_files = gauge("open_files", "Files open for writing (one per type, partition, day).")
        self._buffered = gauge("buffered_bytes", "Bytes of events held in memory: open files "
                               "and records gathered for the writers.")
        self._oldest_age = gauge("oldest_open_file_age_seconds", "Age of the oldest open file.")
        self._watermark = table(
            "low_watermark_offset", "Committed low watermark W: every event up to it is committed.",
            "gauge")
        self._committed = table("committed_offset", "Highest offset in a committed file.", "gauge")
        self._event_time = table(
            "last_committed_event_timestamp_seconds",
            "Newest event time (unix s) among committed rows; freshness lag = time() - this.",
            "gauge")
        self._lag = gauge(
            "consumer_lag_offsets", "High watermark from fetches minus the committed seek position.",
            "topic", "partition")
        self._lag_s = gauge(
            "consumer_lag_seconds", "Age of the oldest record not yet committed (Kafka time); "
            "0 when the committed position has reached the high watermark.", "topic", "partition")
        self._markers = counter("markers_written", "Offset markers written.", "partition")
        self._heartbeats = counter("heartbeats", "Markers written by a heartbeat (no data).", "partition")
        self._failures = counter("storage_failures", "Storage operations that raised.", "op")
        self._store_calls = counter(
            "store_calls", "Calls to the output store, by kind (list, read, read_tail, exists, put, "
            "stage, publish, discard, delete): what the NameNode or object store is asked.", "op")
        self._retries = counter("storage_retries", "Storage operations retried after a failure.", "op")
        self._fencing = counter("fencing_conflicts", "Publishes lost to another owner.", "partition")
        self._rebalances = counter("rebalances", "Partition assignment changes.", "kind")
        self._recovery_s = Histogram(
            "garmexport_recovery_duration_seconds", "Time to read committed state and seek.",
            ["kind"], buckets=_RECOVERY_BUCKETS, registry=registry)
        self._paused = gauge("paused_partitions", "Partitions paused while the store is down.")
        self._assigned = gauge("assigned_partitions", "Partitions assigned to this instance.")
        self._up = gauge("up", "1 while the exporter process runs.")
        self._hive_registered = counter(
            "hive_partitions_registered", "Day partitions this process registered (or found "
            "registered) in the Hive metastore.", "table")
        self._hive_columns = counter(
            "hive_columns_added", "Columns this process added to Hive tables.", "table")
        self._hive_failures = counter(
            "hive_registration_failures", "Registration rounds that failed (metastore down).")
        self._hive_pending = gauge(
            "hive_pending_partitions", "Day partitions waiting to be registered.")
        self._hive_oldest = gauge(
            "hive_oldest_pending_seconds", "Age of the oldest day partition waiting to be "
            "registered (0: none waits).")
        self._ready = gauge("ready", "1 when /health/ready answers 200.")
        Info("garmexport_build", "Version of the running exporter.", registry=registry).info(
            {"version": __version__, "python": platform.python_version()})
        # the client's own process_* families (RSS, CPU, open fds, start time), read from
        # /proc at each scrape: the default registry has them, an injected one must ask
        ProcessCollector(registry=registry)
        # Max kept for the monotone gauges, per (type, partition): (committed offset, event time).
        self._maxima: dict[tuple[str, int], tuple[int, float]] = {}
        self._up.set(1)

    @classmethod
    def create(cls, registry: CollectorRegistry, wall_s: Callable[[], float] = time.time) -> Metrics:
        """Metrics registered on ``registry`` (a fresh one per process or test);
        ``wall_s`` is the clock (unix seconds) that ages the lag in seconds."""
        return cls(registry, wall_s)

    # -- flow -----------------------------------------------------------------------------
    def consumed(self, topic: str, partition: int, count: int) -> None:
        """``count`` records of ``partition`` were polled."""
        self._consumed.labels(topic, partition).inc(count)

    def exported(self, type_: str, count: int) -> None:
        """``count`` events were routed to the writers of output ``type_``."""
        self._exported.labels(type_).inc(count)

    def not_exported(self, marker: int, count: int) -> None:
        """``count`` events of a known type that has no output were dropped."""
        self._not_exported.labels(marker).inc(count)

    def already_committed(self, type_: str, partition: int, count: int) -> None:
        """``count`` events were skipped by the resume rule (offset <= W or <= the day's last)."""
        self._already_committed.inc((type_, partition), count)

    def quarantined(self, type_: str, reason: str, count: int = 1) -> None:
        """``count`` records went to quarantine; ``reason`` is a frames.Reason value."""
        self._quarantined.labels(type_, reason).inc(count)

    def published(self, type_: str, kind: str, rows: int, nbytes: int, duration_s: float) -> None:
        """One file of ``kind`` (data or quarantine) reached its final name; raises ValueError
        on an unknown kind."""
        _check(kind, PUBLISH_KINDS, "publish kind")
        self._rows.labels(type_, kind).inc(rows)
        self._files.labels(type_, kind).inc()
        self._bytes.labels(type_, kind).inc(nbytes)
        self._publish_s.labels(kind).observe(duration_s)

    def set_writers(self, writers: int, files: int, buffered_bytes: int, oldest_age_s: float) -> None:
        """Snapshot of the open writers; ``oldest_age_s`` is 0 when no file is open."""
        self._open_writers.set(writers)
        self._open_files.set(files)
        self._buffered.set(buffered_bytes)
        self._oldest_age.set(oldest_age_s)

    # -- committed state ------------------------------------------------------------------
    def set_watermark(self, type_: str, partition: int, low_watermark: int) -> None:
        """W(type, partition) as written in the newest marker (-1: nothing committed yet)."""
        self._watermark.set((type_, partition), low_watermark)

    def committed(self, type_: str, partition: int, last_offset: int, newest_event_s: float) -> None:
        """A file of (type, partition) was committed up to ``last_offset``, its newest event
        at ``newest_event_s`` (unix seconds). Both gauges only move forward: a late-day file
        with lower offsets or older events leaves them where they are."""
        key = (type_, partition)
        old_offset, old_time = self._maxima.get(key, (-1, float("-inf")))
        offset, event_s = max(old_offset, last_offset), max(old_time, newest_event_s)
        self._maxima[key] = (offset, event_s)
        self._committed.set(key, offset)
        self._event_time.set(key, event_s)

    def set_lag(self, topic: str, partition: int, high_watermark: int, position: int) -> None:
        """Lag in offsets: ``high_watermark`` (next offset the broker will write, as seen in
        fetches) minus ``position`` (the seek position, DESIGN.md 4.5).
        Never negative: a stale watermark reads as 0, not as a credit."""
        self._lag.labels(topic, partition).set(max(0, high_watermark - position))

    def set_lag_time(self, topic: str, partition: int, waiting: bool, oldest_ms: int) -> None:
        """Lag in seconds (garmexport.observe.lag_time): 0 unless records ``waiting`` past the
        committed position, else the wall clock at each scrape minus ``oldest_ms``, the
        Kafka time (ms) of the record at that position."""
        wall_s = self._wall_s
        self._lag_s.labels(topic, partition).set_function(
            lambda: lag_seconds(waiting, oldest_ms, wall_s()))

    def marker_written(self, partition: int, heartbeat: bool) -> None:
        """A marker for ``partition`` was written; ``heartbeat`` when no data file caused it."""
        self._markers.labels(partition).inc()
        if heartbeat:
            self._heartbeats.labels(partition).inc()

    def store_call(self, op: str) -> None:
        """One call ``op`` to the output store (:mod:`garmexport.storage.counted`)."""
        self._store_calls.labels(op).inc()

    # -- trouble --------------------------------------------------------------------------
    def storage_failure(self, op: str, count: int = 1) -> None:
        """``count`` storage calls ``op`` (``publish``: a data or quarantine file,
        ``marker``) raised StorageError."""
        self._failures.labels(op).inc(count)

    def storage_retry(self, op: str, count: int = 1) -> None:
        """``count`` failed storage calls ``op`` will be tried again after back-off."""
        self._retries.labels(op).inc(count)

    def fencing_conflict(self, partition: int) -> None:
        """An exclusive publish for ``partition`` lost to another owner (PublishConflict)."""
        self._fencing.labels(partition).inc()

    # -- group membership -----------------------------------------------------------------
    def rebalance(self, kind: str) -> None:
        """A rebalance callback ran: ``assign``, ``revoke`` or ``lost`` (else ValueError)."""
        self._rebalances.labels(_check(kind, REBALANCE_KINDS, "rebalance kind")).inc()

    def recovered(self, kind: str, duration_s: float) -> None:
        """Reading committed state and seeking took ``duration_s``; ``kind`` is ``start``,
        ``assign`` or ``fence`` (re-read after a lost publish), else ValueError."""
        self._recovery_s.labels(_check(kind, RECOVERY_KINDS, "recovery kind")).observe(duration_s)

    def set_partitions(self, assigned: int, paused: int) -> None:
        """How many partitions this instance holds, and how many of them are paused."""
        self._assigned.set(assigned)
        self._paused.set(paused)

    def assign_partition(self, topic: str, partition: int) -> None:
        """``partition`` joined this instance: create its counters at 0, so that the first
        fencing conflict or marker shows as an increase (``increase()`` needs a sample
        before it, and a series born at 1 has none)."""
        self._consumed.labels(topic, partition)
        for counter in (self._fencing, self._markers, self._heartbeats):
            counter.labels(partition)

    def forget_partition(self, topic: str, partition: int) -> None:
        """Drop every per-partition gauge of ``partition`` (on revoke or loss), so that the
        new owner's values are the only ones Prometheus sees. Counters stay: they only grow."""
        self._lag.remove(topic, partition)
        self._lag_s.remove(topic, partition)
        for key in [k for k in self._maxima if k[1] == partition]:
            del self._maxima[key]
        for table in (self._watermark, self._committed, self._event_time):
            table.remove_where("partition", partition)

    # -- Hive partition registration (called from its worker thread) ------------------------
    def hive_registered(self, table: str, partitions: int, columns: int) -> None:
        self._hive_registered.labels(table).inc(partitions)
        if columns:
            self._hive_columns.labels(table).inc(columns)

    def hive_failure(self) -> None:
        self._hive_failures.inc()

    def set_hive_pending(self, partitions: int, oldest_s: float) -> None:
        self._hive_pending.set(partitions)
        self._hive_oldest.set(oldest_s)

    def set_ready(self, ready: bool) -> None:
        """Mirror of the readiness answer (set by garmexport.observe.health)."""
        self._ready.set(1 if ready else 0)

    def set_up(self, up: bool) -> None:
        """0 while shutting down, so a final scrape shows the exporter leaving on purpose."""
        self._up.set(1 if up else 0)


class CompactionMetrics:
    """The outcome of one compaction run, as pushed to a Pushgateway or written to a
    textfile (garmexport.compaction.report). Gauges only: a batch job holds no counter
    across runs; each run replaces the last run's values. The last success time is set
    only by a successful run, so a failed run leaves the previous one in place."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"garmexport_compaction_{name}", doc, registry=registry)

        self._finished = gauge("last_run_timestamp_seconds", "End of the last run (unix s).")
        self._success = gauge("last_run_success", "1 if the last run succeeded (exit 0), else 0.")
        self._duration = gauge("last_run_duration_seconds", "Duration of the last run.")
        self._days = gauge("last_run_days_compacted", "Days compacted by the last run.")
        self._files_in = gauge("last_run_files_compacted", "Files the last run replaced.")
        self._files_out = gauge("last_run_files_written", "Compacted files the last run wrote.")
        self._bytes_in = gauge("last_run_bytes_compacted", "Bytes of the files the last run replaced.")
        self._problems = gauge("last_run_problems", "Files the last run left alone with a problem.")
        self._registry = registry
        self._last_success: Gauge | None = None

    @classmethod
    def create(cls, registry: CollectorRegistry) -> CompactionMetrics:
        """Compaction metrics on ``registry`` (a fresh one per run)."""
        return cls(registry)

    def run(self, *, success: bool, finished_s: float, duration_s: float, days: int,
            files_in: int, files_out: int, bytes_in: int, problems: int) -> None:
        """One run ended at ``finished_s`` (unix s) after ``duration_s``; counts are those
        of its summary (0 when it raised before the end)."""
        self._finished.set(finished_s)
        self._success.set(1 if success else 0)
        self._duration.set(duration_s)
        self._days.set(days)
        self._files_in.set(files_in)
        self._files_out.set(files_out)
        self._bytes_in.set(bytes_in)
        self._problems.set(problems)

    def last_success(self, finished_s: float) -> None:
        """The end (unix s) of the last successful run: this one, or one before it. Not
        exposed until set: a failed push must not overwrite an earlier success."""
        if self._last_success is None:
            self._last_success = Gauge(
                "garmexport_compaction_last_success_timestamp_seconds",
                "End of the last successful run (unix s).", registry=self._registry)
        self._last_success.set(finished_s)
