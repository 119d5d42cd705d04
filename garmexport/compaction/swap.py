"""The crash-safe swap of a day's small files for compacted ones: journal, roll forward.

Decision. Compacted files go into the same day directory as the raw files
(``<output>/day=D/``), under names the exporter never uses (:mod:`.names`), and the Hive
partition location never changes. Switching the Hive partition LOCATION to a generation
directory was rejected: the exporter keeps publishing late files into ``<output>/day=D/``
(a Hive partition has one location, so they would vanish from Hive until the next run),
and readers of the raw dataset path would no longer see the compacted rows at all.

Steps of one generation G of (output, day)::

    1 write   Spark writes every output into _compaction/<output>/day=D/gG/ (hidden)
    2 commit  the journal _compaction/<output>/day=D/gG.json is written (temp + rename):
              it names every staged file, its final name, its ranges sidecar, and every
              input to delete. Its existence IS the commit point.
    3 publish per output: write the sidecar, then rename staged -> final (day dir)
    4 delete  every input file (a compacted input: data file first, then its sidecar)
    5 clean   remove the staging dir, then the journal

Crash recovery (run at the start of every compaction run, before planning):

- no journal for gG (crash in 1 or 2): nothing visible changed; the staging dir and any
  journal temp file are deleted: the swap is undone.
- journal gG exists (crash in 3, 4 or 5): :func:`roll_forward` computes the remaining
  actions from what is present and applies them: finished renames are skipped, missing
  sidecars are written, inputs still present are deleted. Every action is idempotent,
  so a crash during recovery is recovered the same way. Inputs are deleted only after
  every output is final; an output that is neither staged nor final is a
  :class:`ProtocolViolation` and no input is deleted.

So after the next run finishes, every row is in exactly one visible file. What readers see
*during* steps 3-4 (seconds): both an output and some of its inputs (rows twice), because
no file system offers an atomic multi-file swap; a query planned before step 4 may fail on
a deleted input and must be retried. Schedule compaction when the day is closed (nobody is
expected to be reading it as it changes) -- a table format (Iceberg/Delta) is the fix if
that window matters.

Assumptions: one compaction job per output root at a time (a scheduled job); the lateness
delay is longer than any exporter zombie can live (session timeout + max file age), because
a deleted raw name can no longer fence a zombie that still holds that file open.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from garmexport.errors import ProtocolViolation

CRASH_ENV = "GARMEXPORT_COMPACT_CRASH_AT"
STEPS = ("before-journal", "after-journal", "mid-publish", "after-publish", "mid-delete",
         "after-delete")


@dataclass(frozen=True)
class Move:
    """One output: staged path -> final path, with its sidecar path and content."""

    staged: str
    final: str
    sidecar: str
    sidecar_body: str


@dataclass(frozen=True)
class Journal:
    """The committed intent of one generation; paths are relative to the output root."""

    output: str
    day: str
    generation: int
    staging: str
    moves: tuple[Move, ...]
    deletes: tuple[str, ...]  # inputs, in deletion order

    def to_json(self) -> bytes:
        doc = {"version": 1, "output": self.output, "day": self.day,
               "generation": self.generation, "staging": self.staging,
               "moves": [m.__dict__ for m in self.moves], "deletes": list(self.deletes)}
        return json.dumps(doc, indent=1).encode()

    @staticmethod
    def from_json(data: bytes) -> Journal:
        doc = json.loads(data)
        return Journal(doc["output"], doc["day"], int(doc["generation"]), doc["staging"],
                       tuple(Move(**m) for m in doc["moves"]), tuple(doc["deletes"]))


@dataclass(frozen=True)
class WriteFile:
    path: str
    body: str


@dataclass(frozen=True)
class Rename:
    src: str
    dst: str


@dataclass(frozen=True)
class Delete:
    path: str


@dataclass(frozen=True)
class DeleteTree:
    path: str


Action = WriteFile | Rename | Delete | DeleteTree


def roll_forward(journal: Journal, present: frozenset[str], journal_path: str) -> list[Action]:
    """The actions that finish a committed swap, given the set of paths that exist.

    Pure. Raises ProtocolViolation if an output is neither staged nor final (its rows
    would be lost by deleting the inputs).
    """
    actions: list[Action] = []
    for m in journal.moves:
        if m.sidecar not in present:
            actions.append(WriteFile(m.sidecar, m.sidecar_body))
        if m.final in present:
            if m.staged in present:  # a copy-based rename (object store) stopped half-way
                actions.append(Delete(m.staged))
        elif m.staged in present:
            actions.append(Rename(m.staged, m.final))
        else:
            raise ProtocolViolation(f"compacted output {m.final} of journal {journal_path} "
                                    "is neither staged nor published; inputs are kept")
    actions.extend(Delete(p) for p in journal.deletes if p in present)
    actions.append(DeleteTree(journal.staging))
    actions.append(Delete(journal_path))
    return actions


def crash_point(step: str) -> None:
    """Test hook: die like SIGKILL at ``step`` when GARMEXPORT_COMPACT_CRASH_AT names it."""
    if os.environ.get(CRASH_ENV) == step:
        os._exit(137)


def apply(fs: object, actions: Iterable[Action],
          crash: Callable[[str], None] = crash_point) -> None:
    """Apply ``actions`` in order with the FileOps ``fs``, calling the crash hooks."""
    renames = deletes = 0
    published = False
    for a in actions:
        if isinstance(a, WriteFile):
            fs.write(a.path, a.body.encode())  # type: ignore[attr-defined]
        elif isinstance(a, Rename):
            fs.rename(a.src, a.dst)  # type: ignore[attr-defined]
            renames += 1
            if renames == 1:
                crash("mid-publish")
        elif isinstance(a, Delete):
            if not published:
                published = True
                crash("after-publish")
            fs.delete(a.path)  # type: ignore[attr-defined]
            deletes += 1
            if deletes == 1:
                crash("mid-delete")
        elif isinstance(a, DeleteTree):
            if not published:
                published = True
                crash("after-publish")
            crash("after-delete")
            fs.delete_tree(a.path)  # type: ignore[attr-defined]
