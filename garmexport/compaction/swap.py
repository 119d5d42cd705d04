"""The crash-safe swap of a day's small files for compacted ones: journal, roll forward.

Decision (DESIGN.md 6). The compacted files end in the same day directory as the raw files
(``<output>/day=D/``), under names the exporter never uses (:mod:`.names`): path readers,
the exporter's late files and ``verify`` all keep one directory per day. No file system
here swaps many files at once, so that directory changes file by file. Readers that go
through the metastore are spared that: while the day directory changes, the Hive
partition points at a *view*, ``<output>/day=D/_gG/`` (hidden from path readers), that
already holds the day as it is after the swap, and the location is flipped there and back
in one metastore call each.

Steps of one generation G of (output, day)::

    1 write   Spark writes every output into _compaction/<output>/day=D/gG/ (hidden)
    2 commit  _COMPLETE of the day is removed; then the journal
              _compaction/<output>/day=D/gG.json is written (temp + rename): it names every
              staged file, its final name, its ranges sidecar, every input to delete and
              the view. Its existence IS the commit point.
    3 view    the staged outputs are renamed into the view, and every other file a reader
              of the day sees (not an input) is copied there (a hard link on a local disk)
    4 flip    the partition's location -> the view           (metastore readers: after);
              then the flip's wall time is recorded in _compaction/<output>/day=D/gG.flip
      wait    until the grace has passed since the flip, the day directory is left as it
              was (path readers: before), and files the exporter publishes into it are
              copied into the view (step 3 again: the *sweep*), so that a query planned
              on the day directory before the flip still finds every file it listed
    5 publish per output: write the sidecar, copy view -> final name in the day dir
    6 delete  every input file (a compacted input: data file first, then its sidecar)
    7 unflip  the partition's location -> the day directory  (metastore readers: after)
    8 retire  the view is recorded as retired now; it is deleted a grace period later
              (:func:`.retired.sweep`), so a query that listed it still finds its files
    9 clean   remove the staging dir, the flip record, then the journal

With a grace of 0, steps 5-9 follow step 4 at once, as before the wait existed. With a
grace, step 4 belongs to the wait (:func:`.grace.wait_out`, ``flip=True``): the commit and
the recovery take a swap that is not due as far as its view (step 3) and leave the
partition on the day directory, which the swap has not changed yet and which the
exporter's late files reach at once. So the process that points the metastore at a view
is the one that sweeps the view from then on, every few seconds until the swap ends; a
partition flipped by the commit or the recovery stayed on its view unswept while that
process went on with other work (compacting the next days; before Spark, the Spark
start), and the day's new files were missing from the table for that long.

Without a metastore (``compact --no-hive``) a journal has no view: steps 3, 4, 7 and 8 are
skipped and step 5 renames staged -> final, as before views existed.

Crash recovery (at the start of every run, before planning; a retried run is the usual
one):

- no journal for gG (crash in 1 or 2): nothing visible changed; the staging dir and any
  journal temp file are deleted: the swap is undone (``_COMPLETE`` may be gone: the run
  writes it again once the day is compacted).
- journal gG exists (crash in 3-9): :func:`roll_forward` computes the remaining actions
  from what is present and applies them: done renames and copies are skipped, missing
  sidecars are written, inputs still present are deleted, and both flips are made again
  (setting a location is idempotent). Steps 5-9 only once the grace since the recorded
  flip has passed (``due``). A swap that is not due, with its day directory untouched,
  goes back to step 3: its view is filled, and if a killed run may have flipped it (a
  flip record, or a complete view: a flip without a record), the partition is pointed at
  the day directory again and the record deleted (:class:`Hold`), so the wait's flip
  starts the grace anew, never from an earlier time. An output that is neither staged, in
  the view nor final is a :class:`ProtocolViolation` and no input is deleted.

What each reader sees, crash or not: a metastore reader sees the day before the swap until
step 4 and after it from then on (the view, then the day directory once it equals the
view). A path reader of the day directory sees it change file by file in steps 5-6: some
rows twice for that window (the run reports it), or until the next run after a crash there.
Files the exporter publishes into the day before the flip are swept into the view right
before it and again right after it; later ones reach metastore readers at the next sweep
(while the run waits), or at step 7 (files published during steps 5-6, which follow the
last sweep).

The actions are applied by :mod:`.swap_apply`.

Assumptions: one compaction job per output root at a time (:mod:`.lease` makes sure); the
lateness delay is longer than any exporter zombie can live (session timeout + max file
age), because a deleted raw name can no longer fence a zombie that still holds that file
open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from garmexport.compaction.names import flip_path, is_hidden
from garmexport.protocol.naming import day_dir
from garmexport.errors import ProtocolViolation
from garmexport.process.crash_hooks import hook

#: crash points, in the order a swap with a view reaches them: "before-journal",
#: "after-journal", "mid-view", "after-view", "after-flip", "waiting" (the run waits out
#: the grace: :mod:`.grace`), "mid-publish", "after-publish", "mid-delete", "after-delete",
#: "after-unflip" (a swap without a view skips the view, flip and wait ones). The first
#: six keep their old places in the tuple.
STEPS = ("before-journal", "after-journal", "mid-publish", "after-publish", "mid-delete",
         "after-delete", "mid-view", "after-view", "after-flip", "after-unflip", "waiting")
#: crash point of the tests that kill compaction: just before ``_COMPLETE`` is written
#: (:mod:`.complete`), after the day's swaps
COMPLETE_STEP = "before-complete"


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
    #: the metastore view directory ("" when no metastore is flipped: a plain swap)
    view: str = ""

    def to_json(self) -> bytes:
        doc = {"version": 2 if self.view else 1, "output": self.output, "day": self.day,
               "generation": self.generation, "staging": self.staging,
               "moves": [m.__dict__ for m in self.moves], "deletes": list(self.deletes)}
        if self.view:
            doc["view"] = self.view
        return json.dumps(doc, indent=1).encode()

    @staticmethod
    def from_json(data: bytes) -> Journal:
        doc = json.loads(data)
        return Journal(doc["output"], doc["day"], int(doc["generation"]), doc["staging"],
                       tuple(Move(**m) for m in doc["moves"]), tuple(doc["deletes"]),
                       str(doc.get("view", "")))

    @property
    def day_dir(self) -> str:
        """The day directory, the parent of every final name."""
        return day_dir(self.output, self.day)

    @property
    def flip_record(self) -> str:
        """Where the wall time of the flip to the view is recorded (beside the journal)."""
        return flip_path(self.output, self.day, self.generation)

    def in_view(self, move: Move) -> str:
        """Where ``move``'s output sits in the view (its final name)."""
        return f"{self.view}/{move.final.rpartition('/')[2]}"


@dataclass(frozen=True)
class WriteFile:
    path: str
    body: str


@dataclass(frozen=True)
class Rename:
    src: str
    dst: str


@dataclass(frozen=True)
class Copy:
    """Copy ``src`` to ``dst`` (never overwriting); both stay. ``publish``: ``dst`` is in
    the day directory, so path readers see it from now on."""

    src: str
    dst: str
    publish: bool = False


@dataclass(frozen=True)
class Delete:
    path: str


@dataclass(frozen=True)
class DeleteTree:
    path: str


@dataclass(frozen=True)
class Locate:
    """Point the day's metastore partition at directory ``path`` (relative to the root):
    the view, or with ``back`` the day directory again."""

    path: str
    back: bool = False


@dataclass(frozen=True)
class Hold:
    """Delete the flip record ``flip_record`` (if there is one), then point the day's
    partition at the day directory ``path``: a swap that is not due waits for the flip of
    the run's wait, which sweeps the view from then on; a killed run may have left the
    partition on the view, where no process sweeps it until then. A crash between the two
    leaves a complete view and no record, which holds again."""

    path: str
    flip_record: str


@dataclass(frozen=True)
class Flipped:
    """Record at ``path`` the wall time at which the metastore moved to the view."""

    path: str


@dataclass(frozen=True)
class Retire:
    """Record that the metastore left view ``view``: it may be deleted after the grace."""

    view: str


Action = WriteFile | Rename | Copy | Delete | DeleteTree | Locate | Hold | Flipped | Retire


def _missing_output(m: Move, journal_path: str) -> ProtocolViolation:
    return ProtocolViolation(f"compacted output {m.final} of journal {journal_path} "
                             "is neither staged nor published; inputs are kept")


def roll_forward(journal: Journal, present: frozenset[str], journal_path: str,
                 due: bool = True, flip: bool = False) -> list[Action]:
    """The actions that take a committed swap as far as it may go now, given the set of
    paths that exist.

    ``present`` holds the files of the day directory, the staging dir and the view, and
    the journal's flip record if it exists. ``due``: the grace since the flip has passed
    (or is 0), so the day directory may change (steps 5-9). A swap with a view that is not
    due goes no further than the flip with ``flip`` (the caller sweeps the view from now
    until the swap is due: the grace wait), and a flipped one only sweeps; without
    ``flip`` it goes no further than its view, with the partition on the untouched day
    directory (:class:`Hold` when a killed run may have flipped it). Pure. Raises
    ProtocolViolation if an output is neither staged nor final (nor in the view): its rows
    would be lost by deleting the inputs.
    """
    if journal.view:
        return _roll_forward_view(journal, present, journal_path, due, flip)
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
            raise _missing_output(m, journal_path)
    actions.extend(Delete(p) for p in journal.deletes if p in present)
    actions.append(DeleteTree(journal.staging))
    actions.append(Delete(journal_path))
    return actions


def view_extras(journal: Journal, present: frozenset[str]) -> list[str]:
    """Names in the day dir a reader sees that the swap keeps: neither inputs nor outputs.

    Every non-hidden file counts, ours or not: Spark and Hive read them all.
    """
    base = journal.day_dir + "/"
    gone = set(journal.deletes) | {m.final for m in journal.moves}
    return sorted(p[len(base):] for p in present if p.startswith(base) and p not in gone
                  and "/" not in p[len(base):] and not is_hidden(p[len(base):]))


def fill_view(journal: Journal, present: frozenset[str], journal_path: str
              ) -> list[Action]:
    """Step 3, and the sweep: what the view lacks of the day after the swap (pure)."""
    actions: list[Action] = []
    for m in journal.moves:
        if m.final in present or journal.in_view(m) in present:
            continue
        if m.staged not in present:
            raise _missing_output(m, journal_path)
        actions.append(Rename(m.staged, journal.in_view(m)))
    actions.extend(Copy(f"{journal.day_dir}/{n}", f"{journal.view}/{n}")
                   for n in view_extras(journal, present)
                   if f"{journal.view}/{n}" not in present)
    return actions


def _roll_forward_view(journal: Journal, present: frozenset[str], journal_path: str,
                       due: bool, flip: bool) -> list[Action]:
    actions: list[Action] = []
    swapped = (all(m.final in present for m in journal.moves)
               and not any(p in present for p in journal.deletes))
    if not swapped:  # steps 3-6; once the day dir is swapped, the view is complete too
        actions.extend(fill_view(journal, present, journal_path))
        untouched = (not any(m.final in present for m in journal.moves)
                     and all(p in present for p in journal.deletes))
        if not due and not flip and untouched:
            # a flip is only ever made after the view was complete: else it never happened
            if journal.flip_record in present or all(journal.in_view(m) in present
                                                     for m in journal.moves):
                actions.append(Hold(journal.day_dir, journal.flip_record))
            return actions
        if journal.flip_record not in present:
            actions.append(Locate(journal.view))
            actions.append(Flipped(journal.flip_record))
        if not due:  # the day directory stays as it is until the grace has passed
            return actions
        for m in journal.moves:
            if m.sidecar not in present:
                actions.append(WriteFile(m.sidecar, m.sidecar_body))
            if m.final not in present:
                actions.append(Copy(journal.in_view(m), m.final, publish=True))
        actions.extend(Delete(p) for p in journal.deletes if p in present)
    actions.append(Locate(journal.day_dir, back=True))
    actions.append(Retire(journal.view))
    actions.append(DeleteTree(journal.staging))
    actions.append(Delete(journal.flip_record))
    actions.append(Delete(journal_path))
    return actions


def crash_point(step: str) -> None:
    """Test hook (:mod:`garmexport.process.crash_hooks`): act at swap step ``step`` of
    :data:`STEPS` (or :data:`COMPLETE_STEP`) if ``TEST_GARMEXPORT_CRASH_AFTER`` asks for it: ``<step>`` dies like
    SIGKILL there, ``<step>:1:stop-exit`` stops first and dies only once continued (a test
    SIGKILLs the process group meanwhile, the Spark JVM included), ``*:*:stop`` stops at
    every step and goes on once continued."""
    hook(step, _HOOK_STEPS)


_HOOK_STEPS = (*STEPS, COMPLETE_STEP)
