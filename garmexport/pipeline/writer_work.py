"""Where the writers' work runs: one standard executor per reader, beside its actors.

The in-process actor system runs every actor on one thread, so without this an instance
uses one core. A writer's work is mostly native code that releases the GIL (the upb check,
ptars, Arrow compute, Parquet encoding, zstd, the store's writes and fsyncs; DESIGN.md 9),
so a writer actor hands its :class:`~garmexport.pipeline.writer_order.Job` to
:meth:`WriterWork.run` and returns at once; a ``concurrent.futures.ThreadPoolExecutor``
runs it while the reader's thread polls and routes.

What comes back goes on one queue, :attr:`WriterWork.done`, in the order it was made: each
message's report as soon as it is made (W moves from reports alone), a :class:`Failure`
if a message raised, and last a :class:`JobDone` naming the writer. The reader actor
drains the queue on its own thread before every poll and every tick: it hands the reports
to the Coordinator and each ``JobDone`` to its writer actor as a message, which then
starts its next job. So results come back to the actors as messages, and the actors'
state is only ever touched on the actors' thread. A job runs until it finds nothing left:
what its writer actor decides is live meanwhile is given to the running job
(``Job.offer``), so a busy writer does not wait for the reader's next look between two
batches (DESIGN.md 9.5 has the figures).

What the commit protocol sees does not change (DESIGN.md 9.6): a writer's messages run
one at a time and in the order the reader sent them (the writer actor's order); work
still queued or running is in flight for the ledger, as a batch in an actor's queue always
was, so a crash with work anywhere loses nothing the output promised.

Memory: a batch counts in :attr:`WriterWork.queued_bytes` from the moment its writer actor
queues it until it has run or is void; the reader counts that against
``writer.max_buffered_bytes`` and stops polling while it is above an eighth of it
(:mod:`garmexport.pipeline.poll_policy`).

Liveness: :meth:`WriterWork.running_since` names the message that has run longest (a
publish held up by a store that does not answer, say); the reader reports it as a stall.

A forced stop asks :meth:`WriterWork.open_files` what it abandons: the files each writer's
last report says are open, noted as the report is made. It is asked from a signal handler
or a timer thread: its lock is one that the reader's thread never holds.

The executor's threads are not daemons, but an exporter process always ends with
``os._exit`` (:mod:`garmexport.process.leave`), which does not wait for a publish that its
store holds up (the protocol makes an unfinished publish harmless).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from garmexport.pipeline.crash_points import WORKER, crash_at
from garmexport.pipeline.messages import Batch, Failure, WriterMessage, WriterReport
from garmexport.pipeline.writer_order import Job
from garmexport.protocol.backoff import Backoff

Handler = Callable[[WriterMessage], "WriterReport | None"]
#: a writer: (origin, partition)
Key = tuple[str, int]


@dataclass(frozen=True)
class JobDone:
    """executor -> reader -> writer actor: the writer's running job ended (it may start the
    next). Goes on the done queue after the job's reports."""

    origin: str
    partition: int


Outcome = WriterReport | Failure | JobDone


def until_failure(outcomes: list[Outcome]) -> tuple[list[Outcome], Failure | None]:
    """The outcomes before the first failure, and that failure (None if none): what came
    after a failure is not applied, as the process stops."""
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, Failure):
            return outcomes[:i], outcome
    return outcomes, None


class WriterWork:
    """``threads`` executor threads that run the writers' jobs."""

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"writers' work needs at least one thread, got {threads}")
        self.threads = threads
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="garmexport-worker")
        #: reports, failures and job ends, in the order they were made (per writer: in
        #: message order)
        self.done: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued_bytes = 0
        self._messages = 0
        self._closed = False
        #: writer -> (monotonic time its running message started, the message's kind)
        self._running: dict[Key, tuple[float, str]] = {}
        #: writer -> files open as its last report said; its own lock (see the module doc)
        self._open: dict[Key, int] = {}
        self._open_lock = threading.Lock()

    @property
    def queued_bytes(self) -> int:
        """Bytes of record values in batches queued for writers and not yet handled."""
        return self._queued_bytes

    @property
    def busy(self) -> bool:
        """Whether any writer holds a message that has not run to its end."""
        return self._messages > 0

    def running_since(self) -> tuple[float, str] | None:
        """(monotonic start, what) of the message that has been running longest, if any."""
        with self._lock:
            oldest = min(self._running.items(), key=lambda kv: kv[1][0], default=None)
        if oldest is None:
            return None
        (origin, partition), (since, kind) = oldest
        return since, f"writer {origin}/{partition} has been handling one {kind} since then"

    def open_files(self) -> tuple[int, tuple[int, ...]]:
        """Files open in the writers now, and the partitions that have any, as each writer's
        last report says (a message still running has not changed them yet)."""
        with self._open_lock:
            counts = list(self._open.items())
        return (sum(n for _, n in counts),
                tuple(sorted({p for (_, p), n in counts if n})))

    def held(self, messages: Iterable[WriterMessage], sign: int = 1) -> None:
        """A writer actor queued ``messages`` (``sign`` 1) or voided them (-1)."""
        n = nbytes = 0
        for m in messages:
            n += 1
            nbytes += m.nbytes if isinstance(m, Batch) else 0
        with self._lock:
            self._messages += sign * n
            self._queued_bytes += sign * nbytes

    def run(self, key: Key, handle: Handler, job: Job) -> None:
        """Run ``job``'s messages with ``handle``, in order, on an executor thread, until
        it finds none left."""
        if self._closed:
            return
        self._executor.submit(self._run, key, handle, job)

    def take(self) -> list[Outcome]:
        """The outcomes made so far (without waiting)."""
        out = []
        while True:
            try:
                out.append(self.done.get_nowait())
            except queue.Empty:
                return out

    def wait(self, timeout_s: float) -> list[Outcome]:
        """Like :meth:`take`, but waits up to ``timeout_s`` for the first one."""
        try:
            first = self.done.get(timeout=timeout_s)
        except queue.Empty:
            return []
        return [first, *self.take()]

    def close(self) -> None:
        """Run nothing more: queued jobs are dropped, a running message ends on its own."""
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _run(self, key: Key, handle: Handler, job: Job) -> None:
        try:
            while not self._closed and (msg := job.next()) is not None:
                with self._lock:
                    self._running[key] = (time.monotonic(), type(msg).__name__)
                if isinstance(msg, Batch):
                    crash_at(WORKER)  # TEST ONLY: a batch is in a worker, not yet handled
                try:
                    outcome = handle(msg)
                except Exception as exc:  # noqa: BLE001 - every surprise stops the exporter
                    job.failed = True
                    self.done.put(Failure.of(f"writer {key[0]}/{key[1]}", exc))
                    break
                finally:
                    self.held((msg,), -1)
                if outcome is not None:
                    with self._open_lock:
                        self._open[key] = outcome.open_files
                    self.done.put(outcome)
        finally:
            with self._lock:
                self._running.pop(key, None)
            self.held(job.finish(), -1)
            self.done.put(JobDone(*key))


class SharedBackoff(Backoff):
    """The store's one back-off, shared by writers that run on several threads."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        super().__init__(initial_s, max_s)
        self._lock = threading.Lock()

    def failed(self, now: float) -> int:
        with self._lock:
            return super().failed(now)

    def succeeded(self) -> None:
        with self._lock:
            super().succeeded()

    def waiting(self, now: float) -> bool:
        with self._lock:
            return super().waiting(now)
