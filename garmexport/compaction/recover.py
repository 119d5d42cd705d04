"""Executing swaps: commit one, and recover every half-done one at the start of a run.

The rules are in :mod:`.swap`; this module only lists what is present and applies the
actions :func:`.swap.roll_forward` returns. Recovery must run before any planning, so that
a plan never sees both the inputs and the outputs of one generation. The metastore flips
go through ``locate(output, day, path)`` (:func:`garmexport.compaction.hive.locate`); a
swap with a view cannot be finished without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from garmexport.compaction.fs import FileOps
from garmexport.compaction import retired
from garmexport.compaction.names import (COMPACTION_DIR, COMPLETE, day_dir, journal_path,
                                         parse_journal)
from garmexport.compaction.swap import Effects, Journal, apply, crash_point, roll_forward
from garmexport.errors import ProtocolViolation
from garmexport.observe.logs import log_event
from garmexport.protocol.naming import parse_day_dir

log = logging.getLogger(__name__)


def _no_crash(step: str) -> None:
    pass


#: points the partition of (output, day) at a directory (relative to the root)
Locator = Callable[[str, str, str], None]


class SwapEffects(Effects):
    """The flips through ``locator`` and retirement records stamped ``now_ms``."""

    def __init__(self, fs: FileOps, journal: Journal, locator: Locator | None,
                 now_ms: int) -> None:
        self._fs, self._journal, self._locator, self._now_ms = fs, journal, locator, now_ms

    def locate(self, path: str) -> None:
        if self._locator is None:
            super().locate(path)
        else:
            self._locator(self._journal.output, self._journal.day, path)

    def retire(self, view: str) -> None:
        j = self._journal
        retired.record(self._fs, j.output, j.day, j.generation, view, self._now_ms)


def finish(fs: FileOps, journal: Journal, crash: Callable[[str], None] = _no_crash,
           locator: Locator | None = None, now_ms: int = 0) -> float:
    """Roll a committed journal forward to the end (idempotent); the path readers' window
    in seconds (:func:`.swap.apply`)."""
    base = day_dir(journal.output, journal.day)
    dirs = [journal.staging] + ([journal.view] if journal.view else [])
    present = frozenset([f"{base}/{e.name}" for e in fs.list(base) if not e.is_dir] +
                        [f"{d}/{e.name}" for d in dirs for e in fs.list(d)])
    jpath = journal_path(journal.output, journal.day, journal.generation)
    return apply(fs, roll_forward(journal, present, jpath), crash,
                 SwapEffects(fs, journal, locator, now_ms))


def commit_swap(fs: FileOps, journal: Journal,
                crash: Callable[[str], None] = crash_point, locator: Locator | None = None,
                now_ms: int = 0) -> float:
    """Remove ``_COMPLETE``, write the journal (the commit point), then finish the swap;
    the path readers' window in seconds.

    ``_COMPLETE`` goes first: from the commit point on, the day is not the one it names.
    """
    fs.delete(f"{day_dir(journal.output, journal.day)}/{COMPLETE}")
    crash("before-journal")
    fs.write(journal_path(journal.output, journal.day, journal.generation), journal.to_json())
    crash("after-journal")
    return finish(fs, journal, crash, locator, now_ms)


@dataclass(frozen=True)
class Recovered:
    rolled_forward: int
    rolled_back: int


def _day_dirs(fs: FileOps) -> Iterator[tuple[str, str, str]]:
    """(output, day, dir) of every day directory under ``_compaction/``."""
    for out in fs.list(COMPACTION_DIR):
        for d in fs.list(f"{COMPACTION_DIR}/{out.name}"):
            day = parse_day_dir(d.name)
            if day is not None:
                yield out.name, day, f"{COMPACTION_DIR}/{out.name}/{d.name}"


def _journals_in(fs: FileOps, base: str) -> list[Journal]:
    journals = []
    for e in sorted(fs.list(base), key=lambda e: e.name):
        if e.is_dir or parse_journal(e.name) is None:
            continue
        try:
            journals.append(Journal.from_json(fs.read(f"{base}/{e.name}")))
        except (ValueError, KeyError) as exc:
            raise ProtocolViolation(f"unreadable compaction journal {base}/{e.name}: "
                                    f"{exc}") from exc
    return journals


def committed(fs: FileOps) -> list[Journal]:
    """Every journal under the root: the committed swaps a crashed run left unfinished."""
    return [j for _, _, base in _day_dirs(fs) for j in _journals_in(fs, base)]


def recover_all(fs: FileOps, locator: Locator | None = None, now_ms: int = 0) -> Recovered:
    """Finish every committed swap and undo every uncommitted one under the root.

    Call it holding the root's lease (:mod:`.lease`): a staging dir without a journal is
    taken for a crashed run's, and deleted.
    """
    forward = back = 0
    for output, day, base in _day_dirs(fs):
        for journal in _journals_in(fs, base):
            finish(fs, journal, locator=locator, now_ms=now_ms)
            forward += 1
            log_event(log, "compaction_rolled_forward", output=output, day=day,
                      generation=journal.generation)
        for e in fs.list(base):  # staging dirs with no journal, journal temp files
            (fs.delete_tree if e.is_dir else fs.delete)(f"{base}/{e.name}")
            back += e.is_dir
            if e.is_dir:
                log_event(log, "compaction_rolled_back", output=output, day=day,
                          staging=e.name)
    return Recovered(forward, back)
