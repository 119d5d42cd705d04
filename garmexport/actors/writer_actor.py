"""The writer actor of one (origin, partition): owns its writer and decides what it runs.

On ``StartWriter`` it builds its :class:`~garmexport.pipeline.origin_writer.OriginWriter`
on the process's :class:`~garmexport.pipeline.writer_site.WriterSite` and the writer's lane
in the work pool (:mod:`garmexport.pipeline.work_lanes`), and owns both. A worker thread
runs the lane's messages, one at a time and in order, by calling
:meth:`OriginWriter.handle`; the actor never calls the writer itself, and the reports go
back to the reader through the pool.

What it decides, on its own state (the writer's epoch): which of the reader's messages are
work for the lane (:class:`~garmexport.pipeline.writer_gate.WriterGate`): a message of a
past epoch is void and not queued, and a ``DropOpen`` cancels the work still waiting in the
lane before it is queued itself. The reader only states facts (an epoch starts, records
came, time passed, the epoch is over). The ``where`` of each handler names the message in
a failure report.
"""

from __future__ import annotations

from thespian.actors import ActorTypeDispatcher

from garmexport.actors.actor_support import escalating
from garmexport.pipeline.messages import (
    Batch, DropOpen, FlushOpen, ResetWriter, Tick, WriterMessage,
)
from garmexport.pipeline.origin_writer import OriginWriter
from garmexport.pipeline.work_lanes import Lane
from garmexport.pipeline.writer_gate import Admit, WriterGate
from garmexport.pipeline.writer_site import StartWriter


class WriterActor(ActorTypeDispatcher):
    def __init__(self) -> None:
        super().__init__()
        self.exporter = None
        #: run by the lane's worker thread only, never from the actor's handlers
        self.writer: OriginWriter | None = None
        self.lane: Lane | None = None
        self.gate = WriterGate()

    @escalating("writer start")
    def receiveMsg_StartWriter(self, msg: StartWriter, sender: object) -> None:
        self.exporter = msg.exporter
        site = msg.site
        self.writer = OriginWriter(msg.config, site.storage, msg.origin, msg.partition,
                                   backoff=site.backoff)
        self.lane = site.pool.lane(f"{msg.origin}/{msg.partition}", self.writer.handle)

    def _take(self, msg: WriterMessage) -> None:
        if self.lane is None:
            raise RuntimeError(f"{type(msg).__name__} before StartWriter")
        admit = self.gate.admit(msg)
        if admit is Admit.SKIP:
            return
        if admit is Admit.CANCEL_WAITING:
            self.lane.cancel_waiting()
        self.lane.submit(msg)

    @escalating("writer reset")
    def receiveMsg_ResetWriter(self, msg: ResetWriter, sender: object) -> None:
        self._take(msg)

    @escalating("writer batch")
    def receiveMsg_Batch(self, msg: Batch, sender: object) -> None:
        self._take(msg)

    @escalating("writer tick")
    def receiveMsg_Tick(self, msg: Tick, sender: object) -> None:
        self._take(msg)

    @escalating("writer flush")
    def receiveMsg_FlushOpen(self, msg: FlushOpen, sender: object) -> None:
        self._take(msg)

    @escalating("writer drop")
    def receiveMsg_DropOpen(self, msg: DropOpen, sender: object) -> None:
        self._take(msg)
