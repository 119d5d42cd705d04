"""The writer actor of one (origin, partition): owns its writer, its order and its epoch.

On ``StartWriter`` it builds its :class:`~garmexport.pipeline.origin_writer.OriginWriter` on
the process's :class:`~garmexport.pipeline.writer_start.WriterSite`. Each message of the
reader goes through its :class:`~garmexport.pipeline.writer_order.WriterOrder` (the epoch
rule: a message of a past epoch is void, a ``DropOpen`` voids what waits); what is live
runs as one job at a time on the reader's executor
(:class:`~garmexport.pipeline.writer_work.WriterWork`), and the job's end comes back as a
``JobDone`` message, which starts the next. The writer's reports go to the reader through
the executor's done queue; the actor never calls its writer on its own thread.
"""

from __future__ import annotations

from typing import get_args

from thespian.actors import Actor

from garmexport.actors.escalation import escalate, escalating
from garmexport.pipeline.crash_points import QUEUED, crash_at
from garmexport.pipeline.messages import Batch, WriterMessage
from garmexport.pipeline.origin_writer import OriginWriter
from garmexport.pipeline.writer_order import WriterOrder
from garmexport.pipeline.writer_start import StartWriter
from garmexport.pipeline.writer_work import JobDone, WriterWork

#: the kinds of message the reader sends a writer (:data:`WriterMessage`)
WRITER_MESSAGES = get_args(WriterMessage)


class WriterActor(Actor):
    def __init__(self) -> None:
        super().__init__()
        self.exporter = None
        #: run by an executor thread only, never from the actor's handlers
        self.writer: OriginWriter | None = None
        self.work: WriterWork | None = None
        self.order = WriterOrder()

    def receiveMessage(self, msg: object, sender: object) -> None:
        if isinstance(msg, StartWriter):
            self._start(msg, sender)
        elif isinstance(msg, (JobDone, *WRITER_MESSAGES)):
            try:
                self._take(msg)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - every surprise stops the exporter
                escalate(self, sender, f"writer {type(msg).__name__}", exc)
        # thespian's own messages (an exit request, ...) need nothing from a writer

    @escalating("writer start")
    def _start(self, msg: StartWriter, sender: object) -> None:
        self.exporter = msg.exporter
        site = msg.site
        self.key = (msg.origin, msg.partition)
        self.writer = OriginWriter(msg.config, site.storage, msg.origin, msg.partition,
                                   backoff=site.backoff)
        self.work = site.work

    def _take(self, msg: WriterMessage | JobDone) -> None:
        """Queue a live message (or end the running job), then start the next job."""
        work = self.work
        if work is None or self.writer is None:
            raise RuntimeError(f"{type(msg).__name__} before StartWriter")
        if isinstance(msg, JobDone):
            work.held(self.order.job_done(), -1)
        else:
            work.held((msg,))
            work.held(self.order.take(msg), -1)
            if isinstance(msg, Batch) and self.order.running is not None:
                crash_at(QUEUED)  # TEST ONLY: a batch waits between the reader and its writer
        job = self.order.next_job()
        if job is not None:
            work.run(self.key, self.writer.handle, job)
