"""When an open file is published: the flush policy, as pure functions.

A file is published when it reaches ``max_file_rows`` rows, ``max_file_bytes`` buffered
bytes, or ``max_file_age_s`` seconds since it was opened, whichever comes first. Age is
checked on a timer as well as on every batch, so no file waits for a new record to arrive
before it is flushed. Memory is bounded across all writers of a process by
``max_open_files`` and ``max_buffered_bytes``: when either is exceeded the files opened
longest ago are flushed first until both hold again.

Times are monotonic seconds supplied by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class FlushLimits:
    max_file_rows: int
    max_file_bytes: int
    max_file_age_s: float


@dataclass(frozen=True)
class OpenFileInfo:
    """What the policy needs to know of one open file; ``key`` identifies it to the caller."""

    key: object
    rows: int
    nbytes: int
    opened_at_s: float


def due(files: Iterable[OpenFileInfo], limits: FlushLimits, now_s: float) -> list[object]:
    """Keys of the files that reached a row, size or age limit, oldest first."""
    ready = [
        f
        for f in files
        if f.rows >= limits.max_file_rows
        or f.nbytes >= limits.max_file_bytes
        or now_s - f.opened_at_s >= limits.max_file_age_s
    ]
    return [f.key for f in sorted(ready, key=lambda f: f.opened_at_s)]


@dataclass(frozen=True)
class WriterLoad:
    """What one writer holds open, as its last report said; ``key`` names it to the caller."""

    key: object
    open_files: int
    buffered_bytes: int
    oldest_open_s: float
    flush_requested: bool = False


def fits(open_files: int, buffered_bytes: int, max_open_files: int,
         max_buffered_bytes: int) -> bool:
    """Whether what is open stays within both budgets of a process."""
    return open_files <= max_open_files and buffered_bytes <= max_buffered_bytes


def tick_wanted(oldest_open_s: float | None, store_failing: bool, max_file_age_s: float,
                now_s: float) -> bool:
    """Whether a writer's timer tick can do anything, by the writer's last report.

    A tick publishes the files past their age and retries a failed publish (or waits out
    the shared back-off). Rows and bytes are checked on every batch, so a writer whose
    oldest open file is younger than ``max_file_age_s`` and whose store does not fail has
    nothing to do on a tick, and neither has one with nothing open. A batch in flight
    changes nothing here: the writer reports after it, and the next tick reads that.
    """
    return store_failing or (oldest_open_s is not None
                             and now_s - oldest_open_s >= max_file_age_s)


def writers_to_flush(
    writers: Iterable[WriterLoad], max_open_files: int, max_buffered_bytes: int,
    pending_bytes: int = 0,
) -> list[object]:
    """Keys of the writers to flush whole, oldest open file first, so that what stays open
    (writers already asked to flush do not count) fits both budgets. ``pending_bytes``
    (records gathered for the writers, not yet theirs) counts against the byte budget but
    cannot be flushed: when it alone exceeds the budget, every writer is flushed."""
    loads = [w for w in writers if w.open_files]
    files = sum(w.open_files for w in loads if not w.flush_requested)
    nbytes = pending_bytes + sum(w.buffered_bytes for w in loads if not w.flush_requested)
    chosen: list[object] = []
    for w in sorted(loads, key=lambda w: w.oldest_open_s):
        if fits(files, nbytes, max_open_files, max_buffered_bytes):
            break
        if w.flush_requested:
            continue
        chosen.append(w.key)
        files -= w.open_files
        nbytes -= w.buffered_bytes
    return chosen


def burst_ends_in(burst: int, min_burst: int, last_record_s: float, idle_s: float,
                  now_s: float, behind: Callable[[], bool]) -> float | None:
    """Seconds until a partition's burst (a catch-up) counts as ended; <= 0: it has.

    None when there is no burst to end: the idle flush is off (``idle_s`` 0), or fewer
    than ``min_burst`` records arrived since the last idle flush (a trickle keeps to the
    age limit instead of becoming a file per record). A burst ends ``idle_s`` after its
    last record, unless ``behind()`` says the consumer has more of the partition waiting
    (it is only waiting its turn, not quiet): then None as well. ``behind`` is only asked
    once the time is up.
    """
    if idle_s <= 0 or burst < min_burst:
        return None
    left = last_record_s + idle_s - now_s
    if left <= 0 and behind():
        return None
    return left
