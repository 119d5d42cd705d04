"""The partition reader actor: owns the consumer, polls on a wakeup loop, feeds writers.

A thin shell around :class:`garmexport.pipeline.coordinator.Coordinator`: it handles messages and
runs two timers, and holds the parts :func:`garmexport.actors.exporter_parts.assemble`
builds when it starts (metrics, health and its server, the writers' site, the Coordinator, the
Kafka source, the Hive registrar). Polls run from ``wakeupAfter`` (thespian forbids
blocking loops in handlers); a second timer drives age flushes, markers, heartbeats,
metrics and liveness. The rules it follows live with their roles: when to poll and for how
long (:mod:`garmexport.pipeline.poll_policy`), the lag (``Coordinator.update_lag``), what stalls
the loop (:func:`garmexport.observe.health.stall_of`).

It creates one writer actor per (origin, partition) on the first message the Coordinator sends
it, and hands it the writers' site. Writer actors run their jobs on the executor
(:mod:`garmexport.pipeline.writer_work`), whose outcomes the reader takes before every poll
and every tick, on its own thread: the reports go to the Coordinator, and each job's end
goes to its writer actor as a message. So the Coordinator's state is only ever touched
here.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from thespian.actors import ActorExitRequest, ActorTypeDispatcher, WakeupMessage

from garmexport.process import stop_signal
from garmexport.actors.escalation import escalating
from garmexport.actors.exporter_parts import ExporterParts, assemble
from garmexport.kafka.source import KafkaSource
from garmexport.observe.health import stall_of
from garmexport.observe.logs import log_event
from garmexport.actors.start_messages import StartReader
from garmexport.pipeline.messages import (
    ReaderStopped, StopReader, WriterMessage,
)
from garmexport.pipeline.coordinator import Coordinator
from garmexport.pipeline.poll_policy import SHORT_POLL_S, poll_timeout_s, work_full
from garmexport.pipeline.writer_work import JobDone, until_failure
from garmexport.pipeline.writer_start import StartWriter
from garmexport.actors.writer_actor import WriterActor

log = logging.getLogger(__name__)
POLL, TICK = "poll", "tick"
TICK_S = 1.0


class ReaderActor(ActorTypeDispatcher):
    def __init__(self) -> None:
        super().__init__()
        self.exporter = None
        self.parts: ExporterParts | None = None
        self.closed = False
        #: what is left to close, in order, once closing began
        self._closing: list = []
        self.stopping: str | None = None
        self.stop_deadline = 0.0
        #: seconds until a burst may end, as the last flush_idle said (None: no burst)
        self.idle_wait: float | None = None
        self.sent_to_writers = False
        #: (broker problem, why rejoining) as readiness last heard them
        self.kafka_state = ("", "")

    @escalating("reader start")
    def receiveMsg_StartReader(self, msg: StartReader, sender: object) -> None:
        self.exporter, self.cfg, self.instance = msg.exporter, msg.config, msg.instance
        self.writers: dict[tuple[str, int], object] = {}
        self.parts = assemble(self.cfg, self.instance, self._to_writer, _Port(self),
                              self._assigned, msg.source)
        if msg.unfinished is not None:
            msg.unfinished.count_with(self.parts.site.work.open_files)
        self.wakeupAfter(timedelta(0), POLL)
        self.wakeupAfter(timedelta(seconds=TICK_S), TICK)

    @property
    def coordinator(self) -> Coordinator:
        return self.parts.coordinator  # type: ignore[union-attr]

    def _assigned(self, partitions: list[int]):  # noqa: ANN202
        seeks = self.coordinator.assign(partitions)
        self.parts.health.set_assignment(len(self.coordinator.assigned))  # type: ignore[union-attr]
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
                                        self.parts.site))  # type: ignore[union-attr]
        self.send(addr, msg)

    @escalating("reader wakeup")
    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: object) -> None:
        if msg.payload == POLL:
            self._poll()
        elif msg.payload == TICK:
            self._tick()

    def _take_reports(self, wait_s: float = 0.0) -> bool:
        """Hand the writers' reports made so far to the Coordinator (waiting up to ``wait_s``
        for the first) and each ended job to its writer actor; False after a writer failed
        (the exporter is told)."""
        parts = self.parts
        work = parts.site.work  # type: ignore[union-attr]
        outcomes, failure = until_failure(work.wait(wait_s) if wait_s > 0 else work.take())
        reports = []
        for o in outcomes:
            if isinstance(o, JobDone):
                self.send(self.writers[(o.origin, o.partition)], o)
            else:
                reports.append(o)
        if reports:
            self.coordinator.reports(reports)
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
            parts.health.set_store_reachable(self.coordinator.store_ok)  # type: ignore[union-attr]
        return failure is None

    def _poll(self) -> None:
        if self.stopping is None and stop_signal.requested():
            self.receiveMsg_StopReader(StopReader(stop_signal.why()), None)
        if self.stopping is not None:
            return
        if not self._take_reports():
            return
        parts = self.parts
        work, source = parts.site.work, parts.source  # type: ignore[union-attr]
        w = self.cfg.writer
        if work_full(work.queued_bytes, w.max_buffered_bytes):
            # the writers are behind: wait for their reports rather than read more
            if self._take_reports(SHORT_POLL_S):
                self.idle_wait = self.coordinator.flush_idle()
                self.wakeupAfter(timedelta(0), POLL)
            return
        timeout = poll_timeout_s(self.cfg.source.poll_timeout_s, self.idle_wait,
                                 self.sent_to_writers or work.busy)
        self.sent_to_writers = False
        batches = source.poll(self.cfg.source.poll_max_records, timeout)
        kafka = (source.broker_problem, source.rejoining)
        if kafka != self.kafka_state:
            self.kafka_state = kafka
            parts.health.set_broker_problem(kafka[0])  # type: ignore[union-attr]
            parts.health.set_rejoining(kafka[1])  # type: ignore[union-attr]
        for partition, records in batches.items():
            self.coordinator.records(partition, records)
        self.idle_wait = self.coordinator.flush_idle()
        self.wakeupAfter(timedelta(0), POLL)

    def _tick(self) -> None:
        if not self._take_reports():
            return
        parts = self.parts
        health, coordinator = parts.health, self.coordinator  # type: ignore[union-attr]
        now = time.monotonic()
        health.tick(now)
        if self.stopping is not None:
            if coordinator.settled() or now > self.stop_deadline:
                self._finish()
                return
            coordinator.flush_all()
        coordinator.tick()
        for p in coordinator.seek_positions():
            self._update_lag(p)
        health.set_store_reachable(coordinator.store_ok)
        health.set_writers_healthy(coordinator.store_ok)
        episode = coordinator.episode
        health.set_stalled(*stall_of(episode.since, episode.reason,
                                     parts.site.work.running_since()))  # type: ignore[union-attr]
        registrar = parts.registrar  # type: ignore[union-attr]
        health.set_detail("hive", registrar.problem if registrar else "")
        # which partitions this process holds: what a supervisor says of a reader gone silent
        health.set_detail("partitions", ", ".join(map(str, sorted(coordinator.assigned))))
        self.wakeupAfter(timedelta(seconds=TICK_S if self.stopping is None else 0.05), TICK)

    def _update_lag(self, p: int) -> None:
        source = None if self.closed else self.parts.source  # type: ignore[union-attr]
        self.coordinator.update_lag(p, source.high_watermark(p) if source is not None else None)

    @escalating("reader stop")
    def receiveMsg_StopReader(self, msg: StopReader, sender: object) -> None:
        if self.stopping is not None:
            return
        self.stopping = msg.reason
        self.stop_deadline = time.monotonic() + self.cfg.protocol.shutdown_timeout_s
        log_event(log, "stopping", reason=msg.reason)
        self.coordinator.flush_all()

    def _finish(self) -> None:
        settled = self.coordinator.settled()
        if settled:
            self.coordinator.write_markers(time.monotonic(), force=True)
        self._close()
        self.send(self.exporter, ReaderStopped(f"{self.stopping} (settled={settled})"))

    def _close(self) -> None:
        """Close the parts, each once, in order: the executor (nothing more runs), the
        registrar, the consumer, the server. One that raises stays to be tried again (an
        exit request follows a failure)."""
        parts = self.parts
        if parts is None:
            return
        if not self.closed:
            self.closed = True
            registrar = parts.registrar
            self._closing = [parts.site.work.close, parts.source.close, parts.server.close]
            if registrar is not None:
                self._closing.insert(1, lambda: registrar.stop(self.cfg.hive.timeout_s))
        while self._closing:
            self._closing[0]()
            del self._closing[0]

    def receiveMsg_ActorExitRequest(self, msg: ActorExitRequest, sender: object) -> None:
        try:
            self._close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


class _Port:
    """The reader's view of the consumer (seek, pause, resume)."""

    def __init__(self, actor: ReaderActor) -> None:
        self.actor = actor

    @property
    def _source(self) -> KafkaSource:
        return self.actor.parts.source  # type: ignore[union-attr]

    def seek(self, partition: int, offset: int) -> None:
        self._source.seek(partition, offset)

    def pause(self, partitions: list[int]) -> None:
        self._source.pause(partitions)

    def resume(self, partitions: list[int]) -> None:
        self._source.resume(partitions)

    def behind(self, partition: int) -> bool:
        return self._source.behind(partition)
