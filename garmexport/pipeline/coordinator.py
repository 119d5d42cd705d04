"""The partition reader's logic: assignment, routing, writer reports, markers.

The reader actor is a thin shell around :class:`Coordinator`; Kafka is behind a small port
(seek, pause, resume) and writers behind a ``send`` callable, so this class runs without a
broker or an actor system. Per assigned partition it keeps a ledger (W per origin), the
markers and intents it knows on the store, and an *epoch*: a resync or a new assignment
starts a new epoch, and reports or batches of an older one are ignored.

- assignment: read the committed state (``recovery``), seek to min(W) + 1, reset writers;
- a poll: route each partition's records, one batch per origin, then move "routed up to";
- a writer report: move W; a fence (publish conflict) drops the partition's writers and
  re-reads the state; a store failure pauses every partition until writers recover;
- the timer: age flushes, the memory budget, markers and their garbage collection.

Its helpers, each on the state of :mod:`~garmexport.pipeline.reader_state`: when held
batches and open files move on (:mod:`~garmexport.pipeline.flusher`), pausing and store
failure episodes (:mod:`~garmexport.pipeline.store_watch`), the gauges
(:mod:`~garmexport.pipeline.reader_gauges`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from garmexport.settings.config import Config
from garmexport.observe.lag_time import PositionTimes, waiting
from garmexport.protocol.ledger import PartitionLedger
from garmexport.observe.logs import log_event
from garmexport.protocol.marker_keeper import MarkerKeeper
from garmexport.pipeline.flusher import Flusher
from garmexport.pipeline.messages import DropOpen, Tick, WriterMessage, WriterReport
from garmexport.observe.metrics import Metrics
from garmexport.pipeline.marker_writer import MarkerWriter
from garmexport.pipeline.reader_gauges import set_partition_gauges, set_writer_gauges
from garmexport.pipeline.reader_state import Assigned, KafkaPort
from garmexport.pipeline.jvm_takeover import AtAssignment
from garmexport.pipeline.recovery import read_partition_state
from garmexport.protocol.flush import tick_wanted
from garmexport.protocol.resume import Chain
from garmexport.pipeline.router import ORIGINS, KafkaRecord, Window, route
from garmexport.storage.base import Storage
from garmexport.pipeline.store_episode import StoreEpisode
from garmexport.pipeline.store_watch import StoreWatch

if TYPE_CHECKING:
    from garmexport.hive.register import Registrar

__all__ = ["KafkaPort", "Coordinator"]

log = logging.getLogger(__name__)
_KIND_LABEL = {"d": "data", "q": "quarantine"}


class Coordinator:
    def __init__(
        self, config: Config, instance: str, storage: Storage, metrics: Metrics,
        send: Callable[[str, int, WriterMessage], None], kafka: KafkaPort,
        clock: Callable[[], float] = time.monotonic, wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        queued_bytes: Callable[[], int] = lambda: 0, registrar: Registrar | None = None,
    ) -> None:
        self.cfg, self.instance, self.storage, self.metrics = config, instance, storage, metrics
        self._send, self._kafka, self._clock, self._wall_ms = send, kafka, clock, wall_ms
        self.window = Window.of(config.protocol)
        self.assigned: dict[int, Assigned] = {}
        self._epoch = 0
        self.markers = MarkerWriter(config, instance, storage, metrics, clock, wall_ms)
        self.flusher = Flusher(config.writer, send, kafka, queued_bytes)
        self.store_watch = StoreWatch(kafka)
        #: told what was published (to register new day partitions in Hive); None: no metastore
        self.registrar = registrar
        #: whether ``first_record`` was logged: once per reader, so once per process
        self.first_record_logged = False
        self._jvm = AtAssignment(storage, config)

    @property
    def paused(self) -> bool:
        """Every assigned partition is paused: a writer's store calls fail."""
        return self.store_watch.paused

    @property
    def store_ok(self) -> bool:
        """No store failure episode is under way (readiness)."""
        return self.store_watch.ok

    @property
    def episode(self) -> StoreEpisode:
        return self.store_watch.episode

    # --- assignment -----------------------------------------------------------------
    def assign(self, partitions: Iterable[int]) -> dict[int, int | None]:
        """Recover each partition's state; return the seek offset (None: configured start)."""
        seeks: dict[int, int | None] = {}
        for p in partitions:
            started = time.monotonic()
            seeks[p] = self._start(p)
            self.metrics.recovered("assign", time.monotonic() - started)
            self.metrics.assign_partition(self.cfg.source.topic, p)
        self.metrics.rebalance("assign")
        self._update_partition_gauges()
        log_event(log, "assigned", partitions=sorted(seeks), seeks=seeks)
        return seeks

    def _start(self, p: int) -> int | None:
        src = self.cfg.source
        jvm = self._jvm.scan()
        rec = read_partition_state(self.storage, src.cluster, src.topic, p, jvm)
        if rec.jvm and rec.takeover is None and jvm is not None:
            self._jvm.record(p, jvm)
        seek = rec.state.seek()
        self._epoch += 1
        ledger = PartitionLedger.start(rec.state, ORIGINS, -1 if seek is None else seek)
        keeper = MarkerKeeper(1.0, self.cfg.protocol.heartbeat_interval_s,
                              markers=dict(rec.markers), intents=set(rec.intents),
                              keep=self.cfg.protocol.marker_keep)
        states = {o: rec.state.for_origin(o) for o in ORIGINS}
        a = Assigned(self._epoch, ledger, keeper,
                     PositionTimes.start(rec.markers.values(), self._wall_ms()),
                     states=states)
        log_event(log, "partition_recovered", level=logging.DEBUG, partition=p, seek=seek,
                  epoch=self._epoch, markers=len(rec.markers), intents=len(rec.intents),
                  chains=len(rec.state.last))
        old = self.assigned.pop(p, None)
        if old is not None:
            for origin in old.reset_sent:
                self._send(origin, p, DropOpen(old.epoch))
        self.assigned[p] = a
        return seek

    def revoke(self, partitions: Iterable[int], lost: bool = False) -> None:
        """Forget partitions; their writers drop what is open (fencing covers stragglers)."""
        for p in partitions:
            a = self.assigned.pop(p, None)
            if a is None:
                continue
            for origin in a.reset_sent:
                self._send(origin, p, DropOpen(a.epoch))
            self.metrics.forget_partition(self.cfg.source.topic, p)
        self.metrics.rebalance("lost" if lost else "revoke")
        self._update_partition_gauges()
        if lost:
            log_event(log, "lost", level=logging.WARNING, partitions=sorted(partitions),
                      reason="the group session expired: partitions taken without a revoke")
        else:
            log_event(log, "revoked", partitions=sorted(partitions))

    # --- polling --------------------------------------------------------------------
    def records(self, partition: int, records: list[KafkaRecord]) -> None:
        """Route one poll's records of one partition (offset order) to the writers."""
        a = self.assigned.get(partition)
        if a is None or not records:
            return
        if not self.first_record_logged:  # the start of the steady state, for benchmarks
            self.first_record_logged = True
            log_event(log, "first_record", partition=partition,
                      offset=records[0].offset(),
                      process_cpu_s=round(time.process_time(), 3))
        routed = route(records, a.states, self.window)
        upto = routed.last_offset
        if a.first_run():
            # first run of this partition: W of every origin starts just below the first record
            a.ledger.routed_upto(records[0].offset() - 1)
        now = self._clock()
        head, tail = records[0], records[-1]
        a.took_records(len(records), now, (head.offset(), head.timestamp()[1]),
                       (tail.offset(), tail.timestamp()[1]))
        for origin, b in routed.batches.items():
            a.hold(origin, b, now)  # held records count as in flight: W waits for them
        a.ledger.routed_upto(upto, records[-1].timestamp()[1])
        self.flusher.send_pending(partition, a, now)
        # what is still gathered counts against the byte budget
        self.flusher.enforce_budget(self.assigned)
        m, topic = self.metrics, self.cfg.source.topic
        m.consumed(topic, partition, routed.records)
        if routed.not_exported:
            m.not_exported(-1, routed.not_exported)
        if routed.skipped_committed:
            m.already_committed("", partition, routed.skipped_committed)
        # quarantined records are counted by their writer, once they are in an open file

    # --- reports --------------------------------------------------------------------
    def report(self, r: WriterReport) -> None:
        """One writer report (:meth:`reports`)."""
        self.reports([r])

    def reports(self, reports: Iterable[WriterReport]) -> None:
        """Writer reports, in the order they were made. Each moves W, tells the marker
        keeper of the intents it published and counts its metrics; the byte budget and the
        pause are decided once for all of them, on the views they leave (per report while a
        writer's store fails or just failed, so every failure episode starts and ends as
        the reports say)."""
        for r in reports:
            if self._apply(r):
                self._update_pause()
        self.flusher.enforce_budget(self.assigned)
        self._update_pause()

    def _apply(self, r: WriterReport) -> bool:
        """One report; True if its writer's store fails or failed until now."""
        if r.storage_failures:
            self.metrics.storage_failure("publish", r.storage_failures)
        if r.storage_retries:
            self.metrics.storage_retry("publish", r.storage_retries)
        a = self.assigned.get(r.partition)
        current = a is not None and r.epoch == a.epoch
        if r.fenced_path is not None:
            # every refused publish, even one reported after the partition moved on (a
            # zombie's late work): the count and the line are how a zombie is seen
            self.metrics.fencing_conflict(r.partition)
            log_event(log, "fenced", level=logging.WARNING, partition=r.partition,
                      origin=r.origin, path=r.fenced_path, assigned=current)
            if current:
                self.resync(r.partition)
            return False
        if not current:
            return False
        a.files_reported(
            r.origin, r.handled, r.upto, r.open_first,
            published=[(Chain(r.origin, f.kind, f.day), f.last_offset) for f in r.published],
            intents=[f.intent for f in r.published],
        )
        for f in r.published:
            log_event(log, "file_published", level=logging.DEBUG, partition=r.partition,
                      origin=r.origin, kind=_KIND_LABEL[f.kind], day=f.day, first=f.first_offset,
                      last=f.last_offset, rows=f.rows, bytes=f.nbytes, seconds=round(f.seconds, 4))
            self.metrics.published(r.origin, _KIND_LABEL[f.kind], f.rows, f.nbytes, f.seconds)
            if f.kind == "d":
                self.metrics.exported(r.origin, f.rows)
                self.metrics.committed(r.origin, r.partition, f.last_offset, f.last_event_ms / 1000.0)
        if self.registrar is not None and r.published:
            self.registrar.offer(r.origin, [(f.kind, f.day) for f in r.published])
        for reason, n in r.quarantined:
            self.metrics.quarantined(r.origin, reason, n)
        if r.skipped:
            self.metrics.already_committed(r.origin, r.partition, r.skipped)
        failing = a.writer_reported(r.origin, r.buffered_bytes, r.open_files, r.oldest_open_s,
                                    r.store_failing, r.store_error)
        self.store_watch.writer_reported(r.store_failing, r.store_error)
        return failing

    def resync(self, p: int) -> None:
        """After a fence: drop the partition's writers, re-read its state, seek again."""
        if p not in self.assigned:
            return
        seek = self._start(p)
        self.metrics.recovered("fence", 0.0)
        if seek is not None:
            self._kafka.seek(p, seek)
        log_event(log, "resynced", partition=p, seek=seek)

    # --- timer ----------------------------------------------------------------------
    def flush_idle(self) -> float | None:
        """Publish the open files of partitions whose burst ended; called after every poll.

        Returns the seconds until the next burst may end (None: no burst under way), so
        the caller's next poll waits no longer than that.
        """
        return self.flusher.flush_idle(self.assigned, self._clock())

    def tick(self, final: bool = False) -> None:
        now = self._clock()
        age_s = self.cfg.writer.max_file_age_s
        for p, a in self.assigned.items():
            left = self.flusher.idle_in(p, a, now)
            if left is not None and left <= 0:
                self.flusher.end_burst(p, a, now)
                continue
            self.flusher.send_pending(p, a, now, force=final)
            for origin in a.reset_sent:
                # only the writers a tick can move: each tick is a message, a job's turn
                # and a report, for every writer every second
                v = a.writers.get(origin)
                if v is None or tick_wanted(v.oldest_open_s, v.store_failing, age_s, now):
                    self._send(origin, p, Tick(a.epoch))
        self.flusher.enforce_budget(self.assigned)
        self.write_markers(now, force=final)
        set_writer_gauges(self.metrics, self.assigned, self.flusher.pending_bytes(self.assigned), now)

    def flush_all(self) -> None:
        """Hand over everything gathered and publish every open file (a stop)."""
        now = self._clock()
        for p, a in self.assigned.items():
            self.flusher.end_burst(p, a, now)

    def settled(self) -> bool:
        """No batch in flight and no open file anywhere: safe to write final markers."""
        return all(not a.ledger.open_writers() for a in self.assigned.values())

    def write_markers(self, now: float, force: bool = False) -> None:
        self.markers.write_due(self.assigned, now, force)
        self.store_watch.markers_written(self.markers.error)
        self._update_store()

    def seek_positions(self) -> Mapping[int, int]:
        return {p: a.ledger.seek_position() for p, a in self.assigned.items()}

    def seek_position(self, partition: int) -> int | None:
        a = self.assigned.get(partition)
        return None if a is None else a.ledger.seek_position()

    def update_lag(self, partition: int, high_watermark: int | None) -> None:
        """Set the partition's lag in offsets and in seconds, from the seek position and
        ``high_watermark`` (the next offset the broker will write, as the consumer last
        saw it; None: not known yet)."""
        position = self.seek_position(partition)
        topic = self.cfg.source.topic
        if position is not None and high_watermark is not None:
            self.metrics.set_lag(topic, partition, high_watermark, position)
        oldest = self.oldest_waiting(partition, high_watermark)
        if oldest is not None:
            self.metrics.set_lag_time(topic, partition, *oldest)

    def oldest_waiting(self, partition: int, high_watermark: int | None) -> tuple[bool, int] | None:
        """For the lag in seconds (lag_time): whether records wait past the committed
        position, and the Kafka time (ms) of the record at that position; None when the
        partition is not assigned. On a first run that has read nothing yet, the consumer's
        position stands in for the committed one, which is not known before a record."""
        a = self.assigned.get(partition)
        if a is None:
            return None
        position = a.ledger.seek_position()
        if high_watermark is not None and a.first_run():
            return self._kafka.behind(partition), a.times.time_at(position)
        return waiting(position, high_watermark), a.times.time_at(position)

    # --- the store ------------------------------------------------------------------
    def _update_pause(self) -> None:
        self.store_watch.update_pause(self.assigned)
        self._update_partition_gauges()
        self._update_store()

    def _update_store(self) -> None:
        self.store_watch.update_store(self.assigned, self.markers.failing, self._clock())

    def _update_partition_gauges(self) -> None:
        set_partition_gauges(self.metrics, self.assigned, self.paused)
