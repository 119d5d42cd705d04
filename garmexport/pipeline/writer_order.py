"""What a writer actor runs next, and what it never runs: its order and its epoch rule.

The reader states facts: a new epoch starts for the writer (``ResetWriter``), records,
ticks and flushes of an epoch arrived (``Batch``, ``Tick``, ``FlushOpen``), the epoch is
over (``DropOpen``: the partition was revoked or fenced). The writer actor keeps one
:class:`WriterOrder` and hands the executor one :class:`Job` at a time
(:mod:`garmexport.pipeline.writer_work`):

- a message of an epoch other than the writer's current one is void and never queued: its
  records are read again by whoever owns the partition in a later epoch;
- a ``DropOpen`` of the current epoch voids what waits and what the running job has not
  started yet (running it would only publish files of a forgotten epoch, which fencing
  then refuses) and ends the epoch; the ``DropOpen`` itself is queued, so the writer
  forgets what it has open;
- everything else is queued, in the order it came: given to the running job while it
  still takes messages, else kept waiting for the next;
- at most one job runs. It starts with every message that waited and takes what the
  actor gives it until it finds nothing left; then it ends, and what comes before its
  ``JobDone`` reaches the actor waits for the next job. So a writer's messages run one at
  a time and in the order the reader sent them, whatever thread runs them, and a busy
  writer's job does not wait for a round trip through the reader between messages. A job
  that raised breaks the order: nothing more runs.

This is the one place the epoch rule lives: ``OriginWriter.handle`` runs whatever it is
given, and the pipeline tests' harness passes the reader's messages through a
``WriterOrder`` per writer, as the writer actor does. No actors, no executor: a
:class:`Job`'s lock is the one thing the actor's thread shares with the job's.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections import deque
from dataclasses import dataclass, field
from threading import Lock

from garmexport.pipeline.messages import DropOpen, ResetWriter, WriterMessage


class Job:
    """Messages of one writer that run in order on one executor thread: the actor's thread
    gives it messages (:meth:`offer`), the job's thread takes them (:meth:`next`)."""

    def __init__(self, messages: Iterable[WriterMessage]) -> None:
        self._lock = Lock()
        self._todo: deque[WriterMessage] = deque(messages)
        self._ended = False
        #: set by the job's thread: a message raised, the rest does not run
        self.failed = False

    @property
    def messages(self) -> tuple[WriterMessage, ...]:
        """What the job has yet to run."""
        with self._lock:
            return tuple(self._todo)

    def offer(self, msg: WriterMessage) -> bool:
        """Run ``msg`` after what the job holds; False once it has ended (or failed)."""
        with self._lock:
            if self._ended or self.failed:
                return False
            self._todo.append(msg)
            return True

    def next(self) -> WriterMessage | None:
        """The next message to run; None ends the job (nothing left, or a failure)."""
        with self._lock:
            if self.failed or not self._todo:
                self._ended = True
                return None
            return self._todo.popleft()

    def void_rest(self) -> list[WriterMessage]:
        """Take back what has not started (a drop); the job takes messages still."""
        with self._lock:
            rest = list(self._todo)
            self._todo.clear()
            return rest

    def finish(self) -> list[WriterMessage]:
        """End the job now (its thread stops): what had not started, now void."""
        with self._lock:
            self._ended = True
            rest = list(self._todo)
            self._todo.clear()
            return rest


@dataclass
class WriterOrder:
    #: the epoch of the last ResetWriter; -1 before the first and after a DropOpen
    epoch: int = -1
    waiting: deque[WriterMessage] = field(default_factory=deque)
    running: Job | None = None
    broken: bool = False

    def take(self, msg: WriterMessage) -> list[WriterMessage]:
        """Queue ``msg`` if it is live; return the messages it voids (``msg`` itself when it
        is of another epoch, the waiting ones on a drop), whose bytes are no longer held."""
        if isinstance(msg, ResetWriter):
            self.epoch = msg.epoch
        elif msg.epoch != self.epoch:
            return [msg]
        voided: list[WriterMessage] = []
        if isinstance(msg, DropOpen):
            self.epoch = -1
            voided = list(self.waiting)
            self.waiting.clear()
            if self.running is not None:
                voided += self.running.void_rest()
        if self.broken:
            return [*voided, msg]
        if self.waiting or self.running is None or not self.running.offer(msg):
            self.waiting.append(msg)
        return voided

    def next_job(self) -> Job | None:
        """The job to run now: every waiting message, when none runs (None: nothing to do)."""
        if self.running is not None or not self.waiting or self.broken:
            return None
        self.running = Job(self.waiting)
        self.waiting.clear()
        return self.running

    def job_done(self) -> list[WriterMessage]:
        """The running job ended; after a failure, the order takes nothing more (returns
        what waited, now void)."""
        job, self.running = self.running, None
        if job is None or not job.failed:
            return []
        self.broken = True
        voided = list(self.waiting)
        self.waiting.clear()
        return voided
