"""Where the writers' work runs: a few threads under the writer actors, one lane per writer.

The in-process actor system runs every actor in one thread, so without this an instance
uses one core. A writer's work is mostly native code that releases the GIL (the upb check,
ptars, Arrow compute, Parquet encoding, zstd, the store's writes and fsyncs; DESIGN.md 9),
so a writer actor hands each message to its *lane* and returns at once, and the
:class:`WorkPool`'s threads run the lanes while the reader's thread polls and routes.

What the commit protocol sees does not change (DESIGN.md 9.6):

- A lane runs its writer's messages one at a time, in the order the reader sent them, so a
  writer's state, its chains and the order of its publishes are exactly as before; only
  *when* a message runs moves.
- The writer's reports (one per message, as before) come back through :attr:`WorkPool.done`
  in the order they were made; the reader actor takes them from there on its thread and
  moves W from them alone. Work still in a lane is in flight for the ledger, as a batch in
  an actor's queue always was, so a crash with work anywhere in a lane loses nothing the
  output promised.
- What enters a lane is the writer actor's decision (:mod:`garmexport.pipeline.writer_gate`):
  on a ``DropOpen`` it cancels the messages of its lane that have not started
  (:meth:`Lane.cancel_waiting`); a lane runs what it is given.
- An exception in a lane is turned into a :class:`Failure` on the same queue, and the lane
  takes nothing more: the process exits as if the actor had raised.

Liveness: :meth:`WorkPool.running_since` names the message that has run longest (a
publish held up by a store that does not answer, say); the reader reports it as a stall, so
``/health/live`` fails once one message has run for longer than the live timeout, as it
did when a stuck writer held up the actor system's one thread.

Memory: a batch in a lane counts in :attr:`WorkPool.queued_bytes` until its writer has
handled it; the reader counts that against ``writer.max_buffered_bytes`` and stops polling
while it is above an eighth of it (:mod:`garmexport.pipeline.poll_policy`).

A forced stop asks :meth:`WorkPool.open_files` what it abandons: the files each writer's
last report says are open, noted by the lane as the report is made, so the count is the
writers' own at that moment, not the reader's (which takes the reports on its thread, and
may be held up). It is asked from a signal handler or a timer thread: its lock is one that
the reader's thread never holds.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable

from garmexport.pipeline.crash_points import QUEUED, WORKER, crash_at
from garmexport.pipeline.messages import Batch, Failure, WriterMessage, WriterReport
from garmexport.protocol.backoff import Backoff

log = logging.getLogger(__name__)

Handler = Callable[[WriterMessage], "WriterReport | None"]
Outcome = WriterReport | Failure


def until_failure(outcomes: list[Outcome]) -> tuple[list[WriterReport], Failure | None]:
    """The reports before the first failure, and that failure (None if none): what came
    after a failure is not applied, as the process stops."""
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, Failure):
            return outcomes[:i], outcome  # type: ignore[return-value]
    return outcomes, None  # type: ignore[return-value]


class WorkPool:
    """``threads`` daemon threads running the lanes that have work, each lane by one
    thread at a time. Daemon threads: a process that exits does not wait for a publish
    that its store holds up (the protocol makes an unfinished publish harmless)."""

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"a work pool needs at least one thread, got {threads}")
        self.threads = threads
        #: reports and failures, in the order they were made (per lane: message order)
        self.done: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._ready: queue.SimpleQueue[Lane | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued_bytes = 0
        self._jobs = 0
        self._closed = False
        #: lane -> (monotonic time its running message started, the message's kind)
        self._running: dict[Lane, tuple[float, str]] = {}
        #: lane -> (partition, files open) as its writer's last report said; its own lock,
        #: which only pool threads and open_files take (see the module doc)
        self._open: dict[Lane, tuple[int, int]] = {}
        self._open_lock = threading.Lock()
        self._workers = [threading.Thread(target=self._work, name=f"garmexport-worker-{i}",
                                          daemon=True) for i in range(threads)]
        for t in self._workers:
            t.start()

    @property
    def queued_bytes(self) -> int:
        """Bytes of record values in batches handed to lanes and not yet handled."""
        return self._queued_bytes

    @property
    def busy(self) -> bool:
        """Whether any lane holds a message that has not run to its end."""
        return self._jobs > 0

    def running_since(self) -> tuple[float, str] | None:
        """(monotonic start, what) of the message that has been running longest, if any."""
        with self._lock:
            oldest = min(self._running.items(), key=lambda kv: kv[1][0], default=None)
        if oldest is None:
            return None
        lane, (since, kind) = oldest
        return since, f"writer {lane.name} has been handling one {kind} since then"

    def open_files(self) -> tuple[int, tuple[int, ...]]:
        """Files open in the writers now, and the partitions that have any, as each writer's
        last report says (a message still running has not changed them yet)."""
        with self._open_lock:
            counts = list(self._open.values())
        return sum(n for _, n in counts), tuple(sorted({p for p, n in counts if n}))

    def lane(self, name: str, handle: Handler) -> Lane:
        return Lane(self, name, handle)

    def take(self) -> list[Outcome]:
        """The reports and failures made so far (without waiting)."""
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
        """Run nothing more: queued messages are dropped, a running one ends on its own."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._workers:
            self._ready.put(None)

    def submit(self, lane: Lane, msg: WriterMessage) -> None:
        """Queue ``msg`` last in ``lane`` (:meth:`Lane.submit`)."""
        nbytes = msg.nbytes if isinstance(msg, Batch) else 0
        with self._lock:
            if lane.broken or self._closed:
                return
            lane.waiting.append((msg, nbytes))
            self._jobs += 1
            self._queued_bytes += nbytes
            waiting = len(lane.waiting)
            if not lane.scheduled:
                lane.scheduled = True
                self._ready.put(lane)
        if isinstance(msg, Batch) and waiting > 1:
            crash_at(QUEUED)  # TEST ONLY: a batch waits between the reader and its writer

    def cancel_waiting(self, lane: Lane) -> None:
        """Drop the messages of ``lane`` that have not started (:meth:`Lane.cancel_waiting`)."""
        with self._lock:
            self._drop_waiting(lane)

    def _work(self) -> None:
        while True:
            lane = self._ready.get()
            if lane is None or self._closed:
                return
            self._run_next(lane)

    def _run_next(self, lane: Lane) -> None:
        """Run the oldest message of ``lane`` (on a pool thread); its outcome goes on
        :attr:`done`."""
        with self._lock:
            if not lane.waiting:
                lane.scheduled = False
                return
            msg, nbytes = lane.waiting.popleft()
            self._running[lane] = (time.monotonic(), type(msg).__name__)
        outcome: Outcome | None
        try:
            if isinstance(msg, Batch):
                crash_at(WORKER)  # TEST ONLY: a batch is in a worker, not yet handled
            outcome = lane.handle(msg)
        except Exception as exc:  # noqa: BLE001 - every surprise stops the exporter
            outcome = Failure.of(f"writer {lane.name}", exc)
            lane.broken = True
        if isinstance(outcome, WriterReport):
            with self._open_lock:
                self._open[lane] = (outcome.partition, outcome.open_files)
        if outcome is not None:
            self.done.put(outcome)
        with self._lock:
            del self._running[lane]
            self._queued_bytes -= nbytes
            self._jobs -= 1
            if lane.broken:
                self._drop_waiting(lane)
            if lane.waiting and not self._closed:
                self._ready.put(lane)
            else:
                lane.scheduled = False

    def _drop_waiting(self, lane: Lane) -> None:
        """Drop the messages of ``lane`` that have not started (the lock held)."""
        self._jobs -= len(lane.waiting)
        self._queued_bytes -= sum(n for _, n in lane.waiting)
        lane.waiting.clear()


class Lane:
    """One writer's messages, run in order by its pool, one at a time. The pool reads and
    changes the fields under its lock; a writer actor only submits and cancels."""

    def __init__(self, pool: WorkPool, name: str, handle: Handler) -> None:
        self._pool, self.name, self.handle = pool, name, handle
        #: messages not started yet, with the record bytes each holds
        self.waiting: deque[tuple[WriterMessage, int]] = deque()
        self.scheduled = False  # in the pool's ready queue or running
        self.broken = False  # a message raised: the lane takes nothing more

    def submit(self, msg: WriterMessage) -> None:
        self._pool.submit(self, msg)

    def cancel_waiting(self) -> None:
        """Drop the messages that have not started (a running one runs to its end)."""
        self._pool.cancel_waiting(self)


class SharedBackoff(Backoff):
    """The store's one back-off, shared by writers that now run on several threads."""

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
