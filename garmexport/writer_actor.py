"""The writer actor of one (origin, partition): a thin shell around OriginWriter."""

from __future__ import annotations

from thespian.actors import ActorTypeDispatcher

from garmexport.actor_support import escalating
from garmexport.messages import Batch, DropOpen, FlushOpen, ResetWriter, StartWriter, Tick
from garmexport.origin_writer import OriginWriter
from garmexport.resume import OriginState


class WriterActor(ActorTypeDispatcher):
    def __init__(self) -> None:
        super().__init__()
        self.writer: OriginWriter | None = None
        self.exporter = None

    @escalating("writer start")
    def receiveMsg_StartWriter(self, msg: StartWriter, sender: object) -> None:
        self.exporter = msg.exporter
        self.writer = OriginWriter(msg.config, msg.storage, msg.origin, msg.partition,  # type: ignore[arg-type]
                                   backoff=msg.backoff)  # type: ignore[arg-type]

    @escalating("writer reset")
    def receiveMsg_ResetWriter(self, msg: ResetWriter, sender: object) -> None:
        state = OriginState(msg.low, {(kind, day): off for kind, day, off in msg.last})
        self.writer.reset(msg.epoch, state, msg.low)  # type: ignore[union-attr]

    @escalating("writer batch")
    def receiveMsg_Batch(self, msg: Batch, sender: object) -> None:
        if msg.epoch == self.writer.epoch:  # type: ignore[union-attr]
            self.send(sender, self.writer.handle_batch(msg))  # type: ignore[union-attr]

    @escalating("writer tick")
    def receiveMsg_Tick(self, msg: Tick, sender: object) -> None:
        if msg.epoch == self.writer.epoch:  # type: ignore[union-attr]
            self.send(sender, self.writer.tick())  # type: ignore[union-attr]

    @escalating("writer flush")
    def receiveMsg_FlushOpen(self, msg: FlushOpen, sender: object) -> None:
        if msg.epoch == self.writer.epoch:  # type: ignore[union-attr]
            self.send(sender, self.writer.flush(msg.count))  # type: ignore[union-attr]

    @escalating("writer drop")
    def receiveMsg_DropOpen(self, msg: DropOpen, sender: object) -> None:
        if msg.epoch == self.writer.epoch:  # type: ignore[union-attr]
            self.writer.drop()  # type: ignore[union-attr]
            self.writer.epoch = -1  # type: ignore[union-attr]
