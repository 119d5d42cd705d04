"""The writer actor of one (origin, partition): a thin shell around OriginWriter.

It hands every message to its lane (:mod:`garmexport.pipeline.work_lanes`), where a pool
thread calls :meth:`OriginWriter.handle`, in the order the messages came; the reports go
back to the reader through the pool, not through this actor. The ``where`` of each handler
names the message in a failure report.
"""

from __future__ import annotations

from thespian.actors import ActorTypeDispatcher

from garmexport.actors.actor_support import escalating
from garmexport.pipeline.work_lanes import Lane
from garmexport.pipeline.messages import (
    Batch, DropOpen, FlushOpen, ResetWriter, Tick, WriterMessage,
)
from garmexport.pipeline.writer_site import StartWriter
from garmexport.pipeline.origin_writer import OriginWriter


class WriterActor(ActorTypeDispatcher):
    def __init__(self) -> None:
        super().__init__()
        self.lane: Lane | None = None
        self.exporter = None

    @escalating("writer start")
    def receiveMsg_StartWriter(self, msg: StartWriter, sender: object) -> None:
        self.exporter = msg.exporter
        site = msg.site
        writer = OriginWriter(msg.config, site.storage, msg.origin, msg.partition,
                              backoff=site.backoff)
        self.lane = site.pool.lane(f"{msg.origin}/{msg.partition}", writer.handle)

    def _handle(self, msg: WriterMessage) -> None:
        if self.lane is None:
            raise RuntimeError(f"{type(msg).__name__} before StartWriter")
        self.lane.submit(msg)

    @escalating("writer reset")
    def receiveMsg_ResetWriter(self, msg: ResetWriter, sender: object) -> None:
        self._handle(msg)

    @escalating("writer batch")
    def receiveMsg_Batch(self, msg: Batch, sender: object) -> None:
        self._handle(msg)

    @escalating("writer tick")
    def receiveMsg_Tick(self, msg: Tick, sender: object) -> None:
        self._handle(msg)

    @escalating("writer flush")
    def receiveMsg_FlushOpen(self, msg: FlushOpen, sender: object) -> None:
        self._handle(msg)

    @escalating("writer drop")
    def receiveMsg_DropOpen(self, msg: DropOpen, sender: object) -> None:
        self._handle(msg)
