"""The partition reader's logic: assignment, routing, writer reports, markers.

The reader actor is a thin shell around :class:`Reader`; Kafka is behind a small port
(seek, pause, resume) and writers behind a ``send`` callable, so this class runs without a
broker or an actor system. Per assigned partition it keeps a ledger (W per origin), the
markers and intents it knows on the store, and an *epoch*: a resync or a new assignment
starts a new epoch, and reports or batches of an older one are ignored.

- assignment: read the committed state (``recovery``), seek to min(W) + 1, reset writers;
- a poll: route each partition's records, one batch per origin, then move "routed up to";
- a writer report: move W; a fence (publish conflict) drops the partition's writers and
  re-reads the state; a store failure pauses every partition until writers recover;
- the timer: age flushes, the memory budget, markers and their garbage collection.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from garmexport.config import Config
from garmexport.protocol.flush import WriterLoad, burst_ends_in, fits, writers_to_flush
from garmexport.lag_time import PositionTimes, waiting
from garmexport.protocol.ledger import PartitionLedger
from garmexport.logs import log_event
from garmexport.protocol.marker_keeper import MarkerKeeper
from garmexport.pipeline.messages import (
    Batch, DropOpen, FlushOpen, ResetWriter, Tick, WriterMessage, WriterReport,
)
from garmexport.metrics import Metrics
from garmexport.pipeline.marker_writer import MarkerWriter
from garmexport.protocol.naming import IntentName
from garmexport.pipeline.recovery import read_partition_state
from garmexport.protocol.resume import Chain
from garmexport.pipeline.router import ORIGINS, KafkaRecord, OriginBatch, Window, route
from garmexport.storage.base import Storage
from garmexport.pipeline.store_episode import StoreEpisode

log = logging.getLogger("garmexport.reader")
_KIND_LABEL = {"d": "data", "q": "quarantine"}


class KafkaPort(Protocol):
    def seek(self, partition: int, offset: int) -> None: ...
    def pause(self, partitions: list[int]) -> None: ...
    def resume(self, partitions: list[int]) -> None: ...
    def behind(self, partition: int) -> bool:
        """Whether the last fetch showed records past what was consumed of the partition."""
        ...


@dataclass
class _WriterView:
    buffered_bytes: int = 0
    open_files: int = 0
    oldest_open_s: float | None = None
    store_failing: bool = False
    store_error: str = ""
    flush_requested: bool = False


@dataclass
class _Assigned:
    epoch: int
    ledger: PartitionLedger
    lows: dict[str, int]
    keeper: MarkerKeeper
    #: Kafka times of offsets, for the lag in seconds (lag_time)
    times: PositionTimes
    writers: dict[str, _WriterView] = field(default_factory=dict)
    reset_sent: set[str] = field(default_factory=set)
    #: routed records not yet sent, per origin, with the time the first one arrived
    pending: dict[str, tuple[OriginBatch, float]] = field(default_factory=dict)
    last_record_s: float = 0.0
    #: records routed since the last idle flush: only a burst (a catch-up) ends in one
    burst: int = 0
    state_last: dict[str, tuple[tuple[str, str, int], ...]] = field(default_factory=dict)


class Reader:
    def __init__(
        self, config: Config, instance: str, storage: Storage, metrics: Metrics,
        send: Callable[[str, int, WriterMessage], None], kafka: KafkaPort,
        clock: Callable[[], float] = time.monotonic, wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        queued_bytes: Callable[[], int] = lambda: 0,
    ) -> None:
        self.cfg, self.instance, self.storage, self.metrics = config, instance, storage, metrics
        #: bytes of batches sent to writers that they have not handled yet (held in their
        #: lanes, actors.writer_lanes): memory the budget counts like gathered records
        self._queued_bytes = queued_bytes
        self._send, self._kafka, self._clock, self._wall_ms = send, kafka, clock, wall_ms
        p = config.protocol
        self.window = Window(int(p.event_time_past_days * 86_400_000), int(p.event_time_future_s * 1000),
                             clamp=p.out_of_window == "clamp")
        self.assigned: dict[int, _Assigned] = {}
        self._epoch = 0
        self.markers = MarkerWriter(config, instance, storage, metrics, clock, wall_ms)
        self.paused = False
        self.store_ok = True
        self.episode = StoreEpisode()
        self._store_error = ("publish", "")
        #: garmexport.hive.register.Registrar, or None: told what was published
        self.registrar: Any = None
        #: whether ``first_record`` was logged: once per reader, so once per process
        self.first_record_logged = False

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
        rec = read_partition_state(self.storage, src.cluster, src.topic, p)
        seek = rec.state.seek()
        self._epoch += 1
        ledger = PartitionLedger.start(rec.state, ORIGINS, -1 if seek is None else seek)
        keeper = MarkerKeeper(1.0, self.cfg.protocol.heartbeat_interval_s,
                              markers=dict(rec.markers), intents=set(rec.intents),
                              keep=self.cfg.protocol.marker_keep)
        lows = {o: rec.state.low_of(o) for o in ORIGINS}
        a = _Assigned(self._epoch, ledger, lows, keeper,
                      PositionTimes.start(rec.markers.values(), self._wall_ms()))
        for origin in ORIGINS:
            a.state_last[origin] = tuple(
                (c.kind, c.day, off) for c, off in rec.state.last.items() if c.origin == origin)
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

    def _writer(self, a: _Assigned, origin: str, p: int) -> None:
        if origin not in a.reset_sent:
            a.reset_sent.add(origin)
            a.writers[origin] = _WriterView()
            self._send(origin, p, ResetWriter(a.epoch, a.lows.get(origin, -1), a.state_last.get(origin, ())))

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
        routed = route(records, a.lows, self.window)
        upto = routed.last_offset
        if a.ledger.processed < 0 and not a.keeper.markers:
            # first run of this partition: W of every origin starts just below the first record
            first = records[0].offset()
            a.ledger.routed_upto(first - 1)
        now = self._clock()
        a.last_record_s = now
        a.burst += len(records)
        for r in (records[0], records[-1]):
            a.times.seen(r.offset(), r.timestamp()[1])
        for origin, b in routed.batches.items():
            held = a.pending.get(origin)
            if held is None:
                a.ledger.sent(origin)  # held records count as in flight: W waits for them
                a.pending[origin] = (b, now)
            else:
                held[0].extend(b)
        a.ledger.routed_upto(upto, records[-1].timestamp()[1])
        self._send_pending(partition, a, now)
        self._enforce_budget()  # what is still gathered counts against the byte budget
        m, topic = self.metrics, self.cfg.source.topic
        m.consumed(topic, partition, routed.records)
        if routed.not_exported:
            m.not_exported(-1, routed.not_exported)
        if routed.skipped_committed:
            m.already_committed("", partition, routed.skipped_committed)
        # quarantined records are counted by their writer, once they are in an open file

    def _send_pending(self, partition: int, a: _Assigned, now: float, force: bool = False) -> None:
        """Hand gathered records to their writers once a batch is large or old enough.

        ``upto`` is what the reader has routed when the batch leaves: every record of the
        origin up to it is in this batch or an earlier one.
        """
        w = self.cfg.writer
        for origin, (b, since) in list(a.pending.items()):
            if force or len(b.offsets) >= w.decode_batch_records or now - since >= w.decode_batch_wait_s:
                del a.pending[origin]
                self._writer(a, origin, partition)
                self._send(origin, partition, Batch(
                    a.epoch, a.ledger.processed, tuple(b.offsets), tuple(b.values),
                    tuple(b.kafka_ts), tuple(b.days), tuple(b.bad)))

    # --- reports --------------------------------------------------------------------
    def report(self, r: WriterReport) -> None:
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
            return
        if not current:
            return
        a.ledger.reported(
            r.origin, handled=r.handled, upto=r.upto, open_first=r.open_first,
            published=[(Chain(r.origin, f.kind, f.day), f.last_offset) for f in r.published],
        )
        for f in r.published:
            a.keeper.published(IntentName.parse(f.intent))  # type: ignore[arg-type]
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
        w = a.writers.setdefault(r.origin, _WriterView())
        w.buffered_bytes, w.open_files, w.oldest_open_s = r.buffered_bytes, r.open_files, r.oldest_open_s
        w.flush_requested = False
        self._enforce_budget()
        w.store_error = r.store_error
        w.store_failing = r.store_failing
        if r.store_failing and r.store_error and not r.store_error.startswith("waiting"):
            self._store_error = ("publish", r.store_error)
        self._update_pause()

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
    def _idle_in(self, p: int, a: _Assigned, now: float) -> float | None:
        """Seconds until the partition's burst ends (flush.burst_ends_in)."""
        w = self.cfg.writer
        return burst_ends_in(a.burst, w.decode_batch_records, a.last_record_s, w.idle_flush_s,
                             now, lambda: self._kafka.behind(p))

    def flush_idle(self) -> float | None:
        """Publish the open files of partitions whose burst ended; called after every poll.

        Returns the seconds until the next burst may end (None: no burst under way), so
        the caller's next poll waits no longer than that.
        """
        now = self._clock()
        wait = None
        for p, a in self.assigned.items():
            left = self._idle_in(p, a, now)
            if left is None:
                continue
            if left <= 0:
                self._end_burst(p, a, now)
            else:
                wait = left if wait is None else min(wait, left)
        return wait

    def _end_burst(self, p: int, a: _Assigned, now: float) -> None:
        """Hand over what is gathered and publish every open file of the partition."""
        log_event(log, "flush_burst_end", level=logging.DEBUG, partition=p, records=a.burst,
                  writers=len(a.reset_sent))
        self._send_pending(p, a, now, force=True)
        for origin in a.reset_sent:
            self._send(origin, p, FlushOpen(a.epoch, 0))
        a.burst = 0

    def tick(self, final: bool = False) -> None:
        now = self._clock()
        for p, a in self.assigned.items():
            left = self._idle_in(p, a, now)
            if left is not None and left <= 0:
                self._end_burst(p, a, now)
                continue
            self._send_pending(p, a, now, force=final)
            for origin in a.reset_sent:
                self._send(origin, p, Tick(a.epoch))
        self._enforce_budget()
        self.write_markers(now, force=final)
        self._update_gauges(now)

    def flush_all(self) -> None:
        """Hand over everything gathered and publish every open file (a stop)."""
        now = self._clock()
        for p, a in self.assigned.items():
            self._end_burst(p, a, now)

    def settled(self) -> bool:
        """No batch in flight and no open file anywhere: safe to write final markers."""
        return all(not a.ledger.open_writers() for a in self.assigned.values())

    def _enforce_budget(self) -> None:
        """Over the open-file or buffered-byte budget: flush whole writers, oldest first."""
        w = self.cfg.writer
        views = [v for a in self.assigned.values() for v in a.writers.values()]
        pending = self._pending_bytes()
        # checked after every poll: when everything (even writers already asked to flush)
        # fits, writers_to_flush would choose none, so skip building its loads
        if fits(sum(v.open_files for v in views), sum(v.buffered_bytes for v in views) + pending,
                w.max_open_files, w.max_buffered_bytes):
            return
        loads = [WriterLoad((p, o), v.open_files, v.buffered_bytes, v.oldest_open_s or 0.0,
                            v.flush_requested)
                 for p, a in self.assigned.items() for o, v in a.writers.items()]
        chosen = writers_to_flush(loads, w.max_open_files, w.max_buffered_bytes, pending)
        if chosen:
            log_event(log, "flush_budget", level=logging.DEBUG, writers=len(chosen),
                      open_files=sum(v.open_files for v in views),
                      buffered_bytes=sum(v.buffered_bytes for v in views) + pending)
        for p, origin in chosen:  # type: ignore[misc]
            a = self.assigned[p]
            a.writers[origin].flush_requested = True
            self._send(origin, p, FlushOpen(a.epoch, 0))

    def _pending_bytes(self) -> int:
        """Bytes of the records gathered for the writers, not yet sent or not yet handled."""
        return (sum(b.nbytes for a in self.assigned.values() for b, _ in a.pending.values())
                + self._queued_bytes())

    def write_markers(self, now: float, force: bool = False) -> None:
        self.markers.write_due({p: (a.ledger, a.keeper) for p, a in self.assigned.items()},
                               now, force)
        if self.markers.error:
            self._store_error = ("marker", self.markers.error)
        self._update_store()

    def seek_positions(self) -> Mapping[int, int]:
        return {p: a.ledger.seek_position() for p, a in self.assigned.items()}

    def seek_position(self, partition: int) -> int | None:
        a = self.assigned.get(partition)
        return None if a is None else a.ledger.seek_position()

    def oldest_waiting(self, partition: int, high_watermark: int | None) -> tuple[bool, int] | None:
        """For the lag in seconds (lag_time): whether records wait past the committed
        position, and the Kafka time (ms) of the record at that position; None when the
        partition is not assigned. On a first run that has read nothing yet, the consumer's
        position stands in for the committed one, which is not known before a record."""
        a = self.assigned.get(partition)
        if a is None:
            return None
        position = a.ledger.seek_position()
        if high_watermark is not None and a.ledger.processed < 0 and not a.keeper.markers:
            return self._kafka.behind(partition), a.times.time_at(position)
        return waiting(position, high_watermark), a.times.time_at(position)

    def _update_pause(self) -> None:
        errors = [v.store_error for a in self.assigned.values() for v in a.writers.values()
                  if v.store_failing]
        failing = bool(errors)
        if failing and not self.paused:
            self._kafka.pause(sorted(self.assigned))
            self.paused = True
            # a writer's own failure says more than another's "waiting" for one
            why = min(errors, key=lambda e: e.startswith("waiting") or not e)
            log_event(log, "paused", level=logging.WARNING, partitions=sorted(self.assigned),
                      reason=f"store failing: {why or 'publish failed'}")
        elif not failing and self.paused:
            self._kafka.resume(sorted(self.assigned))
            self.paused = False
        self._update_partition_gauges()
        self._update_store()

    def _update_store(self) -> None:
        """One line when a store failure episode starts (with its reason), one when it
        ends (``resumed``); nothing for the failures and ticks in between."""
        writers = any(v.store_failing for a in self.assigned.values() for v in a.writers.values())
        now = self._clock()
        if writers or self.markers.failing:
            op, reason = self._store_error
            if self.episode.failed(now, op, reason):
                log_event(log, "store_failing", level=logging.WARNING, op=op, reason=reason)
        else:
            took = self.episode.recovered(now)
            if took is not None:
                log_event(log, "resumed", partitions=sorted(self.assigned), failed_s=round(took, 3))
            self._store_error = ("publish", "")
        self.store_ok = self.episode.since is None

    def _update_partition_gauges(self) -> None:
        n = len(self.assigned)
        self.metrics.set_partitions(n, n if self.paused else 0)

    def _update_gauges(self, now: float) -> None:
        views = [v for a in self.assigned.values() for v in a.writers.values()]
        oldest = min((v.oldest_open_s for v in views if v.oldest_open_s is not None), default=None)
        self.metrics.set_writers(
            sum(1 for v in views if v.open_files), sum(v.open_files for v in views),
            sum(v.buffered_bytes for v in views) + self._pending_bytes(),
            0.0 if oldest is None else now - oldest)

