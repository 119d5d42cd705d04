"""The writer actor of one (origin, partition): owns its writer and decides what it runs.

On ``StartWriter`` it builds its :class:`~garmexport.pipeline.origin_writer.OriginWriter`
on the process's :class:`~garmexport.pipeline.writer_start.WriterSite` and the writer's lane
in the work pool (:mod:`garmexport.pipeline.work_lanes`), and owns both. A worker thread
runs the lane's messages, one at a time and in order, by calling
:meth:`OriginWriter.handle`; the actor never calls the writer itself, and the reports go
back to the reader through the pool.

What it decides, on its own state (the writer's epoch): which of the reader's messages are
work for the lane (:class:`~garmexport.pipeline.writer_gate.WriterGate`): a message of a
past epoch is void and not queued, and a ``DropOpen`` cancels the work still waiting in the
lane before it is queued itself. The reader only states facts (an epoch starts, records
came, time passed, the epoch is over). Every message the reader sends takes the one path
:meth:`WriterActor._take`; a failure report names the message's kind.
"""

from __future__ import annotations

from typing import get_args

from thespian.actors import Actor

from garmexport.actors.escalation import escalate, escalating
from garmexport.pipeline.messages import WriterMessage
from garmexport.pipeline.origin_writer import OriginWriter
from garmexport.pipeline.work_lanes import Lane
from garmexport.pipeline.writer_gate import Admit, WriterGate
from garmexport.pipeline.writer_start import StartWriter

#: the kinds of message the reader sends a writer (:data:`WriterMessage`)
WRITER_MESSAGES = get_args(WriterMessage)


class WriterActor(Actor):
    def __init__(self) -> None:
        super().__init__()
        self.exporter = None
        #: run by the lane's worker thread only, never from the actor's handlers
        self.writer: OriginWriter | None = None
        self.lane: Lane | None = None
        self.gate = WriterGate()

    def receiveMessage(self, msg: object, sender: object) -> None:
        if isinstance(msg, StartWriter):
            self._start(msg, sender)
        elif isinstance(msg, WRITER_MESSAGES):
            try:
                self._take(msg)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - every surprise stops the exporter
                escalate(self, sender, f"writer {type(msg).__name__}", exc)
        # thespian's own messages (an exit request, ...) need nothing from a writer

    @escalating("writer start")
    def _start(self, msg: StartWriter, sender: object) -> None:
        self.exporter = msg.exporter
        site = msg.site
        self.writer = OriginWriter(msg.config, site.storage, msg.origin, msg.partition,
                                   backoff=site.backoff)
        self.lane = site.pool.lane(f"{msg.origin}/{msg.partition}", self.writer.handle)

    def _take(self, msg: WriterMessage) -> None:
        """The gate's decision on ``msg``: not queued, queued, or queued after the
        lane's waiting work is cancelled."""
        if self.lane is None:
            raise RuntimeError(f"{type(msg).__name__} before StartWriter")
        admit = self.gate.admit(msg)
        if admit is Admit.SKIP:
            return
        if admit is Admit.CANCEL_WAITING:
            self.lane.cancel_waiting()
        self.lane.submit(msg)
