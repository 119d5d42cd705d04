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

from collections.abc import Iterable
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


def over_budget(
    files: Iterable[OpenFileInfo], max_open_files: int, max_buffered_bytes: int
) -> list[object]:
    """Keys to flush, oldest first, so that at most ``max_open_files`` files and
    ``max_buffered_bytes`` bytes stay open."""
    ordered = sorted(files, key=lambda f: f.opened_at_s)
    count = len(ordered)
    total = sum(f.nbytes for f in ordered)
    chosen: list[object] = []
    for f in ordered:
        if count <= max_open_files and total <= max_buffered_bytes:
            break
        chosen.append(f.key)
        count -= 1
        total -= f.nbytes
    return chosen


def next_backoff_s(attempt: int, initial_s: float, max_s: float) -> float:
    """Delay before retry number ``attempt`` (1-based): doubling from ``initial_s``, capped."""
    return min(max_s, initial_s * (2 ** max(0, attempt - 1)))
