"""The partition reader actor: owns the consumer, polls on a wakeup loop, feeds writers.

A thin shell around :class:`garmexport.pipeline.reader.Reader`. Polls run from ``wakeupAfter``
(thespian forbids blocking loops in handlers), each waiting at most ``poll_timeout_s``;
a second timer drives age flushes, markers, heartbeats, metrics and liveness. Its parts
(metrics, health server, the writers' site of store, back-off and work pool, Reader, Kafka
source) are built in one place, :func:`garmexport.actors.exporter_parts.assemble`, when it
starts.

Writers run their messages on the pool's threads (:mod:`garmexport.pipeline.work_lanes`),
and their reports come back through the pool: the reader takes them before every poll and
every tick, on its own thread, so the Reader's state is only ever touched here. While the
lanes hold more than an eighth of ``writer.max_buffered_bytes`` of batches, the reader
waits for reports instead of polling.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from thespian.actors import ActorExitRequest, ActorTypeDispatcher, WakeupMessage

from garmexport.process import stop_signal
from garmexport.actors.actor_support import escalating
from garmexport.actors.exporter_parts import assemble
from garmexport.pipeline.kafka_source import KafkaSource
from garmexport.pipeline.unfinished import Unfinished
from garmexport.observe.logs import log_event
from garmexport.pipeline.messages import (
    Failure, ReaderStopped, StartReader, StopReader, WriterMessage, WriterReport,
)
from garmexport.pipeline.writer_site import StartWriter
from garmexport.actors.writer_actor import WriterActor
from garmexport.pipeline.work_lanes import WorkPool

log = logging.getLogger(__name__)
POLL, TICK = "poll", "tick"
TICK_S = 1.0
SHORT_POLL_S = 0.05


class ReaderActor(ActorTypeDispatcher):
    def __init__(self) -> None:
        super().__init__()
        self.exporter = None
        self.source: KafkaSource | None = None
        self.server = None
        self.pool: WorkPool | None = None
        self.registrar = None
        self.stopping: str | None = None
        self.stop_deadline = 0.0
        self.idle_wait: float | None = None
        self.sent_to_writers = False
        self.broker_problem = ""

    @escalating("reader start")
    def receiveMsg_StartReader(self, msg: StartReader, sender: object) -> None:
        self.exporter, self.cfg, self.instance = msg.exporter, msg.config, msg.instance
        self.writers: dict[tuple[str, int], object] = {}
        source = msg.source if isinstance(msg.source, KafkaSource) else None
        parts = assemble(self.cfg, self.instance, self._to_writer, _Port(self), self._assigned, source)
        self.registry, self.metrics, self.health = parts.registry, parts.metrics, parts.health
        self.server, self.site, self.pool = parts.server, parts.site, parts.site.pool
        #: lanes may hold this many bytes of batches before the reader stops polling
        self.lane_bytes_cap = max(1, self.cfg.writer.max_buffered_bytes // 8)
        self.reader, self.source = parts.reader, parts.source
        self.registrar = parts.registrar
        self.unfinished = msg.unfinished if isinstance(msg.unfinished, Unfinished) else Unfinished()
        self.wakeupAfter(timedelta(0), POLL)
        self.wakeupAfter(timedelta(seconds=TICK_S), TICK)

    def _assigned(self, partitions: list[int]):  # noqa: ANN202
        seeks = self.reader.assign(partitions)
        self.health.set_assignment(len(self.reader.assigned))
        for p in partitions:
            # both lags exist from the assignment on, from the watermarks the source
            # queried for it (no fetch of the new assignment has shown one yet)
            self._update_lag(p)
        return seeks

    def _to_writer(self, origin: str, partition: int, msg: WriterMessage) -> None:
        self.sent_to_writers = True
        key = (origin, partition)
        addr = self.writers.get(key)
        if addr is None:
            addr = self.writers[key] = self.createActor(WriterActor)
            self.send(addr, StartWriter(self.cfg, self.instance, origin, partition, self.exporter,
                                        self.site))
        self.send(addr, msg)

    @escalating("reader wakeup")
    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: object) -> None:
        if msg.payload == POLL:
            self._poll()
        elif msg.payload == TICK:
            self._tick()

    def _take_reports(self, wait_s: float = 0.0) -> bool:
        """Hand the writers' reports made so far to the Reader (waiting up to ``wait_s``
        for the first); False after a writer failed (the exporter is told)."""
        outcomes = self.pool.wait(wait_s) if wait_s > 0 else self.pool.take()
        reports: list[WriterReport] = []
        failure: Failure | None = None
        for outcome in outcomes:
            if isinstance(outcome, Failure):
                failure = outcome  # what came after it is not applied: the process stops
                break
            reports.append(outcome)
        if reports:
            self.reader.reports(reports)
        if failure is not None:
            self.send(self.exporter, failure)
        partitions = {r.partition for r in reports}
        # once per partition for all the reports taken, not once per report (a report per
        # writer message): the lag moves when a report moves W, so show it now, not at the
        # next tick; readiness follows the store at once too, as the next tick may be held
        # up for seconds by storage calls that block while the store fails
        for p in partitions:
            self._update_lag(p)
        if partitions:
            self.health.set_store_reachable(self.reader.store_ok)
        return failure is None

    def _poll(self) -> None:
        if self.stopping is None and stop_signal.requested():
            self.receiveMsg_StopReader(StopReader("signal"), None)
        if self.stopping is not None:
            return
        if not self._take_reports():
            return
        if self.pool.queued_bytes > self.lane_bytes_cap:
            # the writers are behind: wait for their reports rather than read more
            if self._take_reports(SHORT_POLL_S):
                self.idle_wait = self.reader.flush_idle()
                self.wakeupAfter(timedelta(0), POLL)
            return
        w = self.cfg.writer
        timeout = w.poll_timeout_s
        if self.idle_wait is not None:
            # no longer than until a burst may end, so a catch-up is published when it ends
            timeout = min(timeout, max(self.idle_wait, 0.01))
        if self.sent_to_writers or self.pool.busy:
            # their reports wait for the end of this poll: a long poll on a quiet topic
            # would hold back W, the lag and the markers. Not 0: a poll that returns at once
            # takes only what librdkafka has queued so far, and many small batches cost
            # more than a short wait.
            timeout = min(timeout, SHORT_POLL_S)
        self.sent_to_writers = False
        batches = self.source.poll(w.batch_max_records, timeout)  # type: ignore[union-attr]
        if self.source.broker_problem != self.broker_problem:  # type: ignore[union-attr]
            self.broker_problem = self.source.broker_problem  # type: ignore[union-attr]
            self.health.set_broker_problem(self.broker_problem)
        for partition, records in batches.items():
            self.reader.records(partition, records)
        self.idle_wait = self.reader.flush_idle()
        self.wakeupAfter(timedelta(0), POLL)

    def _tick(self) -> None:
        if not self._take_reports():
            return
        now = time.monotonic()
        self.health.tick(now)
        if self.stopping is not None:
            if self.reader.settled() or now > self.stop_deadline:
                self._finish()
                return
            self.reader.flush_all()
        self.reader.tick()
        self.unfinished.update(self.reader.open_files(), tuple(sorted(self.reader.assigned)))
        for p in self.reader.seek_positions():
            self._update_lag(p)
        self.health.set_store_reachable(self.reader.store_ok)
        self.health.set_writers_healthy(self.reader.store_ok)
        self._set_stalled()
        self.health.set_detail("hive", self.registrar.problem if self.registrar else "")
        self.wakeupAfter(timedelta(seconds=TICK_S if self.stopping is None else 0.05), TICK)

    def _set_stalled(self) -> None:
        """A store failure episode, or else a writer message that has run for long (a store
        call that does not return), is a stall: liveness fails once it outlasts its timeout."""
        since, why = self.reader.episode.since, self.reader.episode.reason
        running = self.pool.running_since() if since is None else None
        if running is not None:
            since, why = running
        self.health.set_stalled(since, why)

    def _update_lag(self, p: int) -> None:
        position = self.reader.seek_position(p)
        high = self.source.high_watermark(p) if self.source is not None else None
        if position is not None and high is not None:
            self.metrics.set_lag(self.cfg.source.topic, p, high, position)
        self._set_lag_time(p, high)

    def _set_lag_time(self, p: int, high: int | None) -> None:
        oldest = self.reader.oldest_waiting(p, high)
        if oldest is not None:
            self.metrics.set_lag_time(self.cfg.source.topic, p, *oldest)

    @escalating("reader stop")
    def receiveMsg_StopReader(self, msg: StopReader, sender: object) -> None:
        if self.stopping is not None:
            return
        self.stopping = msg.reason
        self.stop_deadline = time.monotonic() + self.cfg.protocol.shutdown_timeout_s
        log_event(log, "stopping", reason=msg.reason)
        self.reader.flush_all()

    def _finish(self) -> None:
        settled = self.reader.settled()
        if settled:
            self.reader.write_markers(time.monotonic(), force=True)
        self._close()
        self.send(self.exporter, ReaderStopped(f"{self.stopping} (settled={settled})"))

    def _close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.registrar is not None:
            self.registrar.stop(self.cfg.hive.timeout_s)
            self.registrar = None
        if self.source is not None:
            self.source.close()
            self.source = None
        if self.server is not None:
            self.server.close()
            self.server = None

    def receiveMsg_ActorExitRequest(self, msg: ActorExitRequest, sender: object) -> None:
        try:
            self._close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


class _Port:
    """The reader's view of the consumer (seek, pause, resume)."""

    def __init__(self, actor: ReaderActor) -> None:
        self.actor = actor

    def seek(self, partition: int, offset: int) -> None:
        self.actor.source.seek(partition, offset)  # type: ignore[union-attr]

    def pause(self, partitions: list[int]) -> None:
        self.actor.source.pause(partitions)  # type: ignore[union-attr]

    def resume(self, partitions: list[int]) -> None:
        self.actor.source.resume(partitions)  # type: ignore[union-attr]

    def behind(self, partition: int) -> bool:
        return self.actor.source.behind(partition)  # type: ignore[union-attr]
