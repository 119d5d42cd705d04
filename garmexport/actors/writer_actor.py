"""The writer actor of one (origin, partition): a thin shell around OriginWriter.

Every handler delegates to :meth:`OriginWriter.handle`; the ``where`` of each names the
message in a failure report.
"""

from __future__ import annotations

from thespian.actors import ActorTypeDispatcher

from garmexport.actors.actor_support import escalating
from garmexport.pipeline.messages import (
    Batch, DropOpen, FlushOpen, ResetWriter, StartWriter, Tick, WriterMessage,
)
from garmexport.pipeline.origin_writer import OriginWriter


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

    def _handle(self, msg: WriterMessage, sender: object) -> None:
        if self.writer is None:
            raise RuntimeError(f"{type(msg).__name__} before StartWriter")
        report = self.writer.handle(msg)
        if report is not None:
            self.send(sender, report)

    @escalating("writer reset")
    def receiveMsg_ResetWriter(self, msg: ResetWriter, sender: object) -> None:
        self._handle(msg, sender)

    @escalating("writer batch")
    def receiveMsg_Batch(self, msg: Batch, sender: object) -> None:
        self._handle(msg, sender)

    @escalating("writer tick")
    def receiveMsg_Tick(self, msg: Tick, sender: object) -> None:
        self._handle(msg, sender)

    @escalating("writer flush")
    def receiveMsg_FlushOpen(self, msg: FlushOpen, sender: object) -> None:
        self._handle(msg, sender)

    @escalating("writer drop")
    def receiveMsg_DropOpen(self, msg: DropOpen, sender: object) -> None:
        self._handle(msg, sender)
