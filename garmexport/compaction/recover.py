"""Executing swaps: commit one, and recover every half-done one at the start of a run.

The rules are in :mod:`.swap`; this module only lists what is present and applies the
actions :func:`.swap.roll_forward` returns. Recovery must run before any planning, so that
a plan never sees both the inputs and the outputs of one generation. The metastore flips
go through ``locate(output, day, path)`` (:func:`garmexport.compaction.hive.locate`); a
swap with a view cannot be finished without it.

A swap with a view goes past its flip only once ``grace_s`` has passed since the flip's
recorded wall time (:mod:`.swap`, "wait"). The flip itself is made by the job's wait
(:mod:`.grace`, ``advance(..., flip=True)``), which sweeps the day's new files into the
view from then on; the commit and the recovery take a swap that is not due only as far as
its view, with the partition on the day directory, and say when the swap may be due at
the earliest (:class:`Outcome`). A run that finds such a swap at its start leaves it
waiting and never compacts its day again before it is over.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from garmexport.compaction.fs import FileOps
from garmexport.compaction import retired
from garmexport.compaction.names import (COMPACTION_DIR, COMPLETE, journal_path, parse_journal,
                                         parse_work_entry)
from garmexport.compaction.swap import (Delete, Flipped, Hold, Journal, crash_point,
                                        fill_view, roll_forward)
from garmexport.compaction.swap_apply import Effects, apply
from garmexport.errors import ProtocolViolation
from garmexport.observe.logs import log_event
from garmexport.protocol.naming import day_dir, parse_day_dir

log = logging.getLogger(__name__)


def _no_crash(step: str) -> None:
    pass


#: points the partition of (output, day) at a directory (relative to the root)
Locator = Callable[[str, str, str], None]
#: the wall clock in milliseconds: flip records and the grace since them
Clock = Callable[[], int]


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Outcome:
    """Where one swap stands after :func:`advance`."""

    #: the path readers' window of this call in seconds (:func:`.swap_apply.apply`)
    window_s: float
    #: wall time (ms) from which the swap may finish (at the earliest, if it is not flipped
    #: yet: its grace counts from the flip); None once it is over
    due_at_ms: int | None = None


class SwapEffects(Effects):
    """The flips through ``locator`` and retirement records stamped ``now_ms``."""

    def __init__(self, fs: FileOps, journal: Journal, locator: Locator | None,
                 now_ms: int, clock: Clock = wall_ms) -> None:
        self._fs, self._journal, self._locator, self._now_ms = fs, journal, locator, now_ms
        self._clock = clock

    def locate(self, path: str) -> None:
        if self._locator is None:
            super().locate(path)
        else:
            self._locator(self._journal.output, self._journal.day, path)

    #: the wall time :meth:`flipped` recorded, if it was called
    flipped_at_ms: int | None = None

    def flipped(self, path: str) -> None:
        self.flipped_at_ms = self._clock()
        self._fs.write(path, json.dumps({"flipped_at_ms": self.flipped_at_ms}).encode())

    def retire(self, view: str) -> None:
        j = self._journal
        retired.record(self._fs, j.output, j.day, j.generation, view, self._now_ms)

    def sweep(self) -> None:
        j = self._journal
        jpath = journal_path(j.output, j.day, j.generation)
        apply(self._fs, fill_view(j, _present(self._fs, j, False), jpath), _no_crash,
              view=True)


def flipped_at(fs: FileOps, journal: Journal) -> int | None:
    """The recorded wall time of the journal's flip to its view, or None (not flipped, or
    not recorded: then the flip is made and recorded again)."""
    head, _, name = journal.flip_record.rpartition("/")
    if not any(e.name == name and not e.is_dir for e in fs.list(head)):
        return None
    try:
        return int(json.loads(fs.read(journal.flip_record))["flipped_at_ms"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ProtocolViolation(f"unreadable flip record {journal.flip_record}: {exc}"
                                ) from exc


def _present(fs: FileOps, journal: Journal, flipped: bool) -> frozenset[str]:
    """The files of the day directory, the staging dir and the view, and the flip record
    if ``flipped``: what :func:`.swap.roll_forward` decides on."""
    base = day_dir(journal.output, journal.day)
    dirs = [journal.staging] + ([journal.view] if journal.view else [])
    return frozenset([f"{base}/{e.name}" for e in fs.list(base) if not e.is_dir] +
                     [f"{d}/{e.name}" for d in dirs for e in fs.list(d)] +
                     ([journal.flip_record] if flipped else []))


def advance(fs: FileOps, journal: Journal, crash: Callable[[str], None] = _no_crash,
            locator: Locator | None = None, now_ms: int = 0, grace_s: float = 0.0,
            clock: Clock = wall_ms, flip: bool = False) -> Outcome:
    """Take a committed swap as far as it may go now (idempotent): to its end, or, with a
    view and less than ``grace_s`` since its flip, to its view with the partition on the
    day directory; with ``flip`` (the caller sweeps the view until the swap is due: the
    grace wait), to the flip and a sweep of the view."""
    flipped = flipped_at(fs, journal) if journal.view else None
    present = _present(fs, journal, flipped is not None)
    due = grace_s <= 0 or (flipped is not None and clock() - flipped >= grace_s * 1000)
    jpath = journal_path(journal.output, journal.day, journal.generation)
    actions = roll_forward(journal, present, jpath, due, flip)
    effects = SwapEffects(fs, journal, locator, now_ms, clock)
    at = next((i for i, a in enumerate(actions) if isinstance(a, Flipped)), None)
    view = bool(journal.view)
    window = apply(fs, actions if at is None else actions[:at + 1], crash, effects, view)
    if at is not None:
        # The flip was made now: sweep into the view, from a new listing, what the exporter
        # published since the one above, before the swap goes on. A file published between
        # the view's fill and the flip was in the day directory when metastore readers
        # left it; without this it reached them only at the next sweep, seconds or a
        # Spark start later (issue 32). The steps of the crash hooks keep their order.
        effects.sweep()
        window = apply(fs, actions[at + 1:], crash, effects, view)
    if Delete(jpath) in actions:  # over (a swapped day only flips back and cleans up)
        return Outcome(window)
    # not due: flipped now if it had no record (the actions then recorded it); not flipped
    # at all, or held back at the day directory: the grace counts from a flip to come
    since = effects.flipped_at_ms if effects.flipped_at_ms is not None else flipped
    if since is None or any(isinstance(a, Hold) for a in actions):
        since = clock()
    return Outcome(window, since + int(grace_s * 1000))


def finish(fs: FileOps, journal: Journal, crash: Callable[[str], None] = _no_crash,
           locator: Locator | None = None, now_ms: int = 0) -> float:
    """Roll a committed journal forward to the end (idempotent), with no grace; the path
    readers' window in seconds (:func:`.swap_apply.apply`)."""
    return advance(fs, journal, crash, locator, now_ms).window_s


def commit(fs: FileOps, journal: Journal, crash: Callable[[str], None] = crash_point,
           locator: Locator | None = None, now_ms: int = 0, grace_s: float = 0.0,
           clock: Clock = wall_ms) -> Outcome:
    """Remove ``_COMPLETE``, write the journal (the commit point), then :func:`advance`.

    ``_COMPLETE`` goes first: from the commit point on, the day is not the one it names.
    """
    fs.delete(f"{day_dir(journal.output, journal.day)}/{COMPLETE}")
    crash("before-journal")
    fs.write(journal_path(journal.output, journal.day, journal.generation), journal.to_json())
    crash("after-journal")
    return advance(fs, journal, crash, locator, now_ms, grace_s, clock)


def commit_swap(fs: FileOps, journal: Journal,
                crash: Callable[[str], None] = crash_point, locator: Locator | None = None,
                now_ms: int = 0) -> float:
    """:func:`commit` with no grace: the swap ends before it returns; the path readers'
    window in seconds."""
    return commit(fs, journal, crash, locator, now_ms).window_s


@dataclass(frozen=True)
class Waiting:
    """A swap flipped to its view that may finish from ``due_at_ms`` on."""

    journal: Journal
    due_at_ms: int


@dataclass(frozen=True)
class Recovered:
    """What :func:`recover_all` did with what killed runs left (each also logged as
    ``compaction_rolled_forward`` or ``compaction_rolled_back``)."""

    #: journaled swaps finished
    rolled_forward: int
    #: staging dirs without a journal deleted
    rolled_back: int
    #: journaled swaps taken to their view, for the run's wait to flip and finish
    waiting: tuple[Waiting, ...] = ()


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


def recover_all(fs: FileOps, locator: Locator | None = None, now_ms: int = 0,
                grace_s: float = 0.0, clock: Clock = wall_ms,
                crash: Callable[[str], None] = _no_crash) -> Recovered:
    """Finish every committed swap that is due, take every other one to its view (the
    partition on the day directory: the run's wait flips it), and undo every uncommitted
    one under the root.

    Call it holding the root's lease (:mod:`.lease`): a staging dir without a journal is
    taken for a crashed run's, and deleted. ``crash``: the tests' hooks at the swap steps
    this reaches (a run passes its own; nothing by default).
    """
    forward = back = 0
    waiting: list[Waiting] = []
    for output, day, base in _day_dirs(fs):
        live: set[int] = set()
        for journal in _journals_in(fs, base):
            outcome = advance(fs, journal, crash, locator, now_ms, grace_s, clock)
            if outcome.due_at_ms is not None:  # at its view, for the run's wait to finish
                waiting.append(Waiting(journal, outcome.due_at_ms))
                live.add(journal.generation)
                log_event(log, "compaction_rolled_forward", output=output, day=day,
                          generation=journal.generation, finished=False,
                          due_in_s=round(max(0, outcome.due_at_ms - clock()) / 1000, 1))
                continue
            forward += 1
            log_event(log, "compaction_rolled_forward", output=output, day=day,
                      generation=journal.generation, finished=True)
        for e in fs.list(base):  # staging dirs with no journal, journal temp files
            if parse_work_entry(e.name) in live:
                continue  # the staging dir and flip record of a waiting swap
            (fs.delete_tree if e.is_dir else fs.delete)(f"{base}/{e.name}")
            back += e.is_dir
            if e.is_dir:
                log_event(log, "compaction_rolled_back", output=output, day=day,
                          staging=e.name)
    return Recovered(forward, back, tuple(waiting))
