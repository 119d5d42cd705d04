"""Executing swaps: commit one, and recover every half-done one at the start of a run.

The rules are in :mod:`.swap`; this module only lists what is present and applies the
actions :func:`.swap.roll_forward` returns. Recovery must run before any planning, so that
a plan never sees both the inputs and the outputs of one generation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from garmexport.compaction.fs import FileOps
from garmexport.compaction.names import COMPACTION_DIR, day_dir, journal_path, parse_journal
from garmexport.compaction.swap import Journal, apply, crash_point, roll_forward
from garmexport.errors import ProtocolViolation
from garmexport.observe.logs import log_event
from garmexport.protocol.naming import parse_day_dir

log = logging.getLogger(__name__)


def _no_crash(step: str) -> None:
    pass


def finish(fs: FileOps, journal: Journal, crash: Callable[[str], None] = _no_crash) -> None:
    """Roll a committed journal forward to the end (idempotent)."""
    base = day_dir(journal.output, journal.day)
    present = frozenset([f"{base}/{e.name}" for e in fs.list(base)] +
                        [f"{journal.staging}/{e.name}" for e in fs.list(journal.staging)])
    jpath = journal_path(journal.output, journal.day, journal.generation)
    apply(fs, roll_forward(journal, present, jpath), crash)


def commit_swap(fs: FileOps, journal: Journal,
                crash: Callable[[str], None] = crash_point) -> None:
    """Write the journal (the commit point), then publish outputs and delete inputs."""
    crash("before-journal")
    fs.write(journal_path(journal.output, journal.day, journal.generation), journal.to_json())
    crash("after-journal")
    finish(fs, journal, crash)


@dataclass(frozen=True)
class Recovered:
    rolled_forward: int
    rolled_back: int


def recover_all(fs: FileOps) -> Recovered:
    """Finish every committed swap and undo every uncommitted one under the root."""
    forward = back = 0
    for out in fs.list(COMPACTION_DIR):
        for d in fs.list(f"{COMPACTION_DIR}/{out.name}"):
            day = parse_day_dir(d.name)
            if day is None:
                continue
            base = f"{COMPACTION_DIR}/{out.name}/{d.name}"
            for e in sorted(fs.list(base), key=lambda e: e.name):
                if e.is_dir or parse_journal(e.name) is None:
                    continue
                try:
                    journal = Journal.from_json(fs.read(f"{base}/{e.name}"))
                except (ValueError, KeyError) as exc:
                    raise ProtocolViolation(f"unreadable compaction journal {base}/{e.name}: "
                                            f"{exc}") from exc
                finish(fs, journal)
                forward += 1
                log_event(log, "compaction_rolled_forward", output=out.name, day=day,
                          generation=journal.generation)
            for e in fs.list(base):  # staging dirs with no journal, journal temp files
                (fs.delete_tree if e.is_dir else fs.delete)(f"{base}/{e.name}")
                back += e.is_dir
                if e.is_dir:
                    log_event(log, "compaction_rolled_back", output=out.name, day=day,
                              staging=e.name)
    return Recovered(forward, back)
