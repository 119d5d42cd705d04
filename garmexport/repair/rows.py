"""``garmexport repair duplicates`` (and the quarantine's copies): which rows to take out. Pure.

Input: where every (partition, offset) of the topic is held (one path per row, as
:func:`garmexport.verify.count.read_output` and :func:`garmexport.verify.jvm_files.read_jvm`
give it) and, per file, whether this run may rewrite it (:class:`Rewritable`, from
:func:`verdict`: compaction's rule, :func:`garmexport.compaction.rewrite.rewritable`, on the
file's name, the markers and the closed days). Output: per file, the rows to drop
(:class:`RowPlan`), so that each record is held by one row; the file is then rewritten
without them through compaction's swap (:mod:`garmexport.repair.swap`).

Which copy stays (:func:`keeper`), and why:

- a copy in a file that cannot be rewritten (a JVM exporter's file, a file above W, a day
  that is not closed, a name that is not ours) stays: it is the only one that can. Two such
  copies leave the record twice (reported, with why each file was left);
- else a dataset row over a quarantine row: the record decodes, and a later decoder only
  makes more of them decode;
- else the copy in the file whose rows are least doubled, so that a file doubled whole
  (a day restored from a backup beside its newer copy) goes whole, with no output, and the
  other files are not rewritten at all; ties by path, so two plans of one root agree.

A record held twice by one file (a hand-made file) keeps one of its rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from garmexport.compaction.rewrite import Rewritable, rewritable
from garmexport.protocol.naming import QUARANTINE_DIR, parse_day_dir

Key = tuple[int, int]  # (partition, offset)


@dataclass(frozen=True, order=True)
class Left:
    """A record still held more than once after the plan: the files and why each stays."""

    partition: int
    offset: int
    files: tuple[tuple[str, str], ...]  # (path, why it cannot be rewritten now)


@dataclass
class RowPlan:
    #: path -> (partition, offset) -> how many of its rows holding that record to drop
    drops: dict[str, Counter[Key]] = field(default_factory=dict)
    left: list[Left] = field(default_factory=list)
    #: records doubled (held more than once) that the plan made single
    fixed: int = 0

    @property
    def rows(self) -> int:
        return sum(sum(c.values()) for c in self.drops.values())

    def by_place(self) -> dict[tuple[str, str], dict[str, Counter[Key]]]:
        """``drops`` grouped per (dataset or quarantine, day), in that order."""
        out: dict[tuple[str, str], dict[str, Counter[Key]]] = {}
        for path in sorted(self.drops):
            place, day_dir_name, _ = path.split("/", 2)
            out.setdefault((place, parse_day_dir(day_dir_name) or day_dir_name), {})[path] = \
                self.drops[path]
        return out


def place_of(path: str) -> str:
    return path.split("/", 1)[0]


def keeper(copies: list[str], can: Mapping[str, Rewritable],
           doubled: Mapping[str, float]) -> str:
    """The copy (a path of ``copies``) that stays (see the module docstring)."""
    def rank(path: str) -> tuple[bool, bool, float, str]:
        return (can[path].ok, place_of(path) == QUARANTINE_DIR, doubled[path], path)
    return min(copies, key=rank)


def plan(held: Mapping[Key, list[str]], can: Callable[[str], Rewritable],
         wanted: Callable[[Key, list[str]], bool] = lambda key, copies: True) -> RowPlan:
    """The rows to drop so that each record ``wanted`` is held once. ``wanted`` picks the
    records to work on among those held more than once (all by default)."""
    doubled_rows: Counter[str] = Counter()
    total: Counter[str] = Counter()
    todo: list[tuple[Key, list[str]]] = []
    for key, copies in held.items():
        total.update(copies)
        if len(copies) > 1 and wanted(key, copies):
            todo.append((key, copies))
            doubled_rows.update(copies)
    files = {p for _, copies in todo for p in copies}
    verdicts = {p: can(p) for p in files}
    doubled = {p: doubled_rows[p] / total[p] for p in files}
    out = RowPlan()
    for (p, o), copies in sorted(todo):
        stay = keeper(copies, verdicts, doubled)
        dropped = list(copies)
        dropped.remove(stay)
        stuck = [c for c in dropped if not verdicts[c].ok]
        for c in dropped:
            if verdicts[c].ok:
                out.drops.setdefault(c, Counter())[(p, o)] += 1
        if stuck:
            out.left.append(Left(p, o, tuple(sorted(
                (c, verdicts[c].why_not or "kept as the one copy") for c in [stay, *stuck]))))
        else:
            out.fixed += 1
    out.left.sort()
    return out


def quarantine_copies(key: Key, copies: list[str]) -> bool:
    """A record a dataset holds and the quarantine holds too (``wanted`` of :func:`plan`
    for the quarantine's replay: a record that decodes now leaves the quarantine)."""
    places = {place_of(c) for c in copies}
    return QUARANTINE_DIR in places and len(places) > 1


def verdict(path: str, last_offset: int, low: Mapping[tuple[str, str, int], Mapping[str, int]],
            closed: Callable[[str], bool], datasets: bool = True) -> Rewritable:
    """Whether a repair may rewrite the file at ``path`` (``<place>/day=D/<name>``) whose
    highest offset held is ``last_offset``, given W per (source, topic, partition) and
    origin (``low``, as compaction reads it from the markers: a type no marker names has
    none) and which days are closed. ``datasets``: False for the quarantine's replay,
    which leaves datasets as they are.

    The rule is compaction's own (:func:`garmexport.compaction.rewrite.rewritable`).
    """
    place, day_dir_name, name = path.split("/", 2)
    if not datasets and place != QUARANTINE_DIR:
        return Rewritable("a dataset file: the quarantine's replay leaves datasets alone")
    day = parse_day_dir(day_dir_name)

    def committed(source: str, topic: str, partition: int, origin: str) -> int | None:
        return low.get((source, topic, partition), {}).get(origin)
    return rewritable(place, day, name, last_offset, committed,
                      day is not None and closed(day))
