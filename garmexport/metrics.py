"""Every Prometheus metric of garmexport, on one injected registry, in one vocabulary.

The exporter calls the typed methods of :class:`Metrics`; nothing else in the code base
imports ``prometheus_client`` for instrumentation. The registry is an argument, never the
global default, so each test builds a fresh one. ``config/METRICS.md`` is the table of
names, types, labels and meanings; ``tests/unit/test_dashboard.py`` keeps the alert rules
and the dashboard to these names.

Vocabulary: ``type`` is an output name (``fs``, ``jvm_gc``, ...) or ``_frame`` for records
that could not be routed to a type; ``partition`` is the Kafka partition number;
``topic`` the source topic; ``kind`` says which of a few fixed cases a sample counts.

Invariants:

- Offsets and times are those the caller passes: this module reads no clock and no state
  beyond the max it keeps for the two monotone per-(type, partition) gauges.
- Per-partition series are removed when the partition leaves this instance
  (:meth:`Metrics.forget_partition`), so a revoked partition never reports a stale lag.
"""

from __future__ import annotations

import platform
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from garmexport import __version__

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

    def __init__(self, registry: CollectorRegistry) -> None:
        """Register every family on ``registry``; use :meth:`create`."""
        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(f"garmexport_{name}", doc, labels, registry=registry)

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(f"garmexport_{name}", doc, labels, registry=registry)

        tp = ("type", "partition")
        self._consumed = counter("events_consumed", "Records polled from Kafka.", "topic", "partition")
        self._exported = counter("events_exported", "Events handed to a writer of their type.", "type")
        self._not_exported = counter(
            "events_not_exported", "Events of known types that are not exported.", "marker")
        self._already_committed = counter(
            "events_already_committed", "Events skipped because a committed file holds them.", *tp)
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
        self._watermark = gauge(
            "low_watermark_offset", "Committed low watermark W: every event up to it is committed.", *tp)
        self._committed = gauge("committed_offset", "Highest offset in a committed file.", *tp)
        self._event_time = gauge(
            "last_committed_event_timestamp_seconds",
            "Newest event time (unix s) among committed rows; freshness lag = time() - this.", *tp)
        self._lag = gauge(
            "consumer_lag_offsets", "High watermark from fetches minus the committed seek position.",
            "topic", "partition")
        self._markers = counter("markers_written", "Offset markers written.", "partition")
        self._heartbeats = counter("heartbeats", "Markers written by a heartbeat (no data).", "partition")
        self._failures = counter("storage_failures", "Storage operations that raised.", "op")
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
        # Max kept for the monotone gauges, per (type, partition): (committed offset, event time).
        self._maxima: dict[tuple[str, int], tuple[int, float]] = {}
        self._up.set(1)

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Metrics:
        """Metrics registered on ``registry`` (a fresh one per process or test)."""
        return cls(registry)

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
        self._already_committed.labels(type_, partition).inc(count)

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
        self._watermark.labels(type_, partition).set(low_watermark)

    def committed(self, type_: str, partition: int, last_offset: int, newest_event_s: float) -> None:
        """A file of (type, partition) was committed up to ``last_offset``, its newest event
        at ``newest_event_s`` (unix seconds). Both gauges only move forward: a late-day file
        with lower offsets or older events leaves them where they are."""
        key = (type_, partition)
        old_offset, old_time = self._maxima.get(key, (-1, float("-inf")))
        offset, event_s = max(old_offset, last_offset), max(old_time, newest_event_s)
        self._maxima[key] = (offset, event_s)
        self._committed.labels(type_, partition).set(offset)
        self._event_time.labels(type_, partition).set(event_s)

    def set_lag(self, topic: str, partition: int, high_watermark: int, position: int) -> None:
        """Lag in offsets: ``high_watermark`` (next offset the broker will write, as seen in
        fetches) minus ``position`` (next offset a restart would read: min over types of W+1).
        Never negative: a stale watermark reads as 0, not as a credit."""
        self._lag.labels(topic, partition).set(max(0, high_watermark - position))

    def marker_written(self, partition: int, heartbeat: bool) -> None:
        """A marker for ``partition`` was written; ``heartbeat`` when no data file caused it."""
        self._markers.labels(partition).inc()
        if heartbeat:
            self._heartbeats.labels(partition).inc()

    # -- trouble --------------------------------------------------------------------------
    def storage_failure(self, op: str) -> None:
        """A storage call ``op`` (a Storage method name, e.g. ``publish``) raised StorageError."""
        self._failures.labels(op).inc()

    def storage_retry(self, op: str) -> None:
        """A failed storage call ``op`` is being tried again after back-off."""
        self._retries.labels(op).inc()

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
        for key in [k for k in self._maxima if k[1] == partition]:
            del self._maxima[key]
        for gauge in (self._watermark, self._committed, self._event_time):
            _remove_partition(gauge, partition)

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
        """Mirror of the readiness answer (set by garmexport.health)."""
        self._ready.set(1 if ready else 0)

    def set_up(self, up: bool) -> None:
        """0 while shutting down, so a final scrape shows the exporter leaving on purpose."""
        self._up.set(1 if up else 0)


def _remove_partition(gauge: Gauge, partition: int) -> None:
    """Remove the (type, partition) children of ``gauge`` whose partition matches."""
    wanted = str(partition)
    stale = {sample.labels["type"] for family in gauge.collect() for sample in family.samples
             if sample.labels["partition"] == wanted}
    for type_ in stale:
        gauge.remove(type_, wanted)
