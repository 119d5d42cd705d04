"""Which files a problem that ``garmexport verify`` found is about. Pure: no I/O.

An operator who reads "1200 duplicates" or "300 missing" next has to find the files. Two
findings name them, from what :func:`garmexport.verify.count.read_output` gathered (per
(partition, offset) the paths of the files holding it, one per row):

- a **duplicate group**: offsets of one partition held by the same set of files, as a
  range (first..last) and a count. A file listed twice holds the offset twice itself.
- a **gap**: missing offsets of one partition and one dataset (where the broker's record
  says the row belongs) bordered by the same two files: ``before`` and ``after`` are the
  files holding its nearest offsets below and above (None at either end of the
  partition), taken from the day directory the rows would be under (``day``) when the
  broker's records give it, else from the whole dataset. Files of one dataset but
  different days interleave in offsets, so without the day the two can be one file, with
  the lost rows amid its own. :meth:`Gap.describe` says which case it is, in words.
- a **disagreeing file**: a file whose name (partition, first offset) disagrees with its
  own footer (partition, first and last offset, rows) or with the rows it holds, or that
  is named like an exporter file but has no footer facts: renamed, copied over, or
  rewritten by hand. Every such file is listed with what disagrees.
- an **unreadable file**: a visible file that pyarrow cannot read (truncated, or not
  Parquet at all, such as a text file named like a data file). Readers of the table fail
  on it too; it is listed with pyarrow's reason, and the other files are checked as usual.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from garmexport.protocol.naming import LABEL_PATTERN, FileName, day_dir, parse_day_dir
from garmexport.storage.footer import FileFacts

Held = Mapping[tuple[int, int], list[str]]


def dataset_of(path: str) -> str:
    """``fs`` for ``fs/day=2026-11-01/x.parquet``: a visible file's first path part."""
    return path.split("/", 1)[0]


@dataclass(frozen=True)
class DuplicateGroup:
    files: tuple[str, ...]
    first: int
    last: int
    count: int

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "files": list(self.files)}


@dataclass(frozen=True)
class Gap:
    dataset: str
    first: int
    last: int
    count: int
    before: str | None
    after: str | None
    #: the day directory whose files border it; None: the dataset's files do
    day: str | None = None

    def describe(self) -> str:
        """What is wrong and which files border it, in words (one line)."""
        where = f"offsets {self.first}..{self.last} ({self.count} missing)"
        before, after = self.before, self.after
        dataset = self.dataset if self.day is None else day_dir(self.dataset, self.day)
        if before is None and after is None:
            return f"{where}: no file of {dataset} holds a row of this partition"
        if before is None:
            return f"{where} before {after}, the first file of {dataset} in this partition"
        if after is None:
            return (f"{where} after {before}, the last file of {dataset} in this partition: "
                    "lost, or not exported yet")
        if before == after:
            return (f"{where} amid the rows of {before}, which holds offsets on both sides: "
                    f"they were in another file of {dataset} (of another day, or "
                    "interleaved with it) that is gone")
        return f"{where} after {before} and before {after}"

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "what": self.describe()}


def duplicate_groups(partition: int, offsets: Iterable[int], held: Held) -> list[DuplicateGroup]:
    """The duplicated ``offsets`` of ``partition`` grouped by the files holding them,
    ordered by first offset."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for o in sorted(offsets):
        files = tuple(sorted(held[(partition, o)]))
        group = groups.get(files)
        if group is None:
            groups[files] = [o, o, 1]
        else:
            group[1], group[2] = o, group[2] + 1
    return sorted((DuplicateGroup(f, *g) for f, g in groups.items()), key=lambda g: g.first)


def gaps(missing: Mapping[int, Mapping[int, str]], held: Held,
         days: Mapping[int, Mapping[int, str]] | None = None) -> dict[int, list[Gap]]:
    """Per partition, its missing offsets (offset -> the dataset that should hold it) as
    gaps bordered by files; one pass over ``held`` for all partitions.

    ``days`` (per partition, offset -> ``YYYY-MM-DD``, the day its row would be under)
    narrows the bordering files to that day's directory, where the lost file sat, for a
    dataset whose rows all sit under the directory of their day (the exporter's layout);
    else the dataset's files border it."""
    days = days or {}
    rows: dict[int, dict[str, list[int]]] = {p: {} for p, m in missing.items() if m}
    misfiled: set[tuple[int, str]] = set()  # (partition, dataset) not laid out by day
    for (p, o), paths in held.items():
        by_place = rows.get(p)
        if by_place is None:
            continue
        day = days.get(p, {}).get(o)
        for path in paths:
            dataset, directory = dataset_of(path), path.rpartition("/")[0]
            if day is not None and directory != day_dir(dataset, day):
                misfiled.add((p, dataset))
            by_place.setdefault(dataset, []).append(o)
            by_place.setdefault(directory, []).append(o)
    out: dict[int, list[Gap]] = {}
    for p, by_place in rows.items():
        for offsets in by_place.values():
            offsets.sort()
        on_day = days.get(p, {})
        places = {o: dataset if (p, dataset) in misfiled or o not in on_day
                  else day_dir(dataset, on_day[o])
                  for o, dataset in missing[p].items()}
        out[p] = _partition_gaps(p, places, by_place, held)
    return out


def _partition_gaps(p: int, missing: Mapping[int, str], by_place: Mapping[str, list[int]],
                    held: Held) -> list[Gap]:
    """``missing``: offset -> the place (dataset or day directory) whose files border it."""
    found: list[Gap] = []
    open_gaps: dict[str, list] = {}  # place -> [place, first, last, count, below, above]
    for o in sorted(missing):
        place = missing[o]
        offsets = by_place.get(place, [])
        i = bisect.bisect_left(offsets, o)
        # bordered by files, not offsets: missing rows interleaved with a file's rows (a
        # lost file of another day) are one gap amid that file, not one gap per offset
        below = _file_at(p, place, offsets[i - 1], held) if i else None
        above = _file_at(p, place, offsets[i], held) if i < len(offsets) else None
        gap = open_gaps.get(place)
        if gap is not None and gap[4:] == [below, above]:
            gap[2], gap[3] = o, gap[3] + 1
            continue
        if gap is not None:
            found.append(_gap(gap))
        open_gaps[place] = [place, o, o, 1, below, above]
    found.extend(_gap(gap) for gap in open_gaps.values())
    return sorted(found, key=lambda g: (g.first, g.dataset))


def _gap(g: list) -> Gap:
    place, first, last, count, below, above = g
    dataset, _, directory = place.partition("/")
    return Gap(dataset, first, last, count, below, above,
               parse_day_dir(directory) if directory else None)


def _file_at(p: int, place: str, offset: int, held: Held) -> str:
    """The file under ``place`` holding (p, offset) (the first, if several do)."""
    return next(f for f in held[(p, offset)] if f.startswith(place + "/"))


@dataclass(frozen=True)
class Disagreement:
    """A file whose name, footer and rows do not tell the same story."""

    path: str
    problems: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.path} disagrees with itself: " + "; ".join(self.problems)

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "problems": list(self.problems), "what": self.describe()}


def disagreement(path: str, name: FileName, facts: FileFacts | None,
                 partitions: Iterable[int], offsets: Iterable[int]) -> Disagreement | None:
    """What disagrees among a file's ``name``, its footer ``facts`` (None: it has none) and
    the ``partitions`` and ``offsets`` of its rows; None when they all agree."""
    held, parts = sorted(offsets), set(partitions)
    problems: list[str] = []
    if parts - {name.partition}:
        problems.append(f"the name says partition {name.partition}, its rows hold partitions "
                        f"{sorted(parts)}")
    if held and held[0] != name.first_offset:
        problems.append(f"the name says first offset {name.first_offset}, its rows start at "
                        f"{held[0]}")
    if facts is None:
        problems.append("named like an exporter file, but its footer has no garmexport facts")
        return Disagreement(path, tuple(problems))
    said = [("source", name.source, facts.source), ("topic", name.topic, facts.topic),
            ("partition", name.partition, facts.partition),
            ("first offset", name.first_offset, facts.first_offset)]
    problems += [f"the name says {what} {a}, the footer {b}" for what, a, b in said if a != b]
    if facts.rows != len(held):
        problems.append(f"the footer says {facts.rows} rows, the file holds {len(held)}")
    if held and (held[0], held[-1]) != (facts.first_offset, facts.last_offset):
        problems.append(f"the footer says offsets {facts.first_offset}..{facts.last_offset}, "
                        f"the rows hold {held[0]}..{held[-1]}")
    return Disagreement(path, tuple(problems)) if problems else None


#: a name shaped like an exporter data file's (source+topic+partition+first offset), with
#: number fields of any length: every exporter data file name, and names that only look so
_SHAPED_LIKE_DATA = re.compile(
    rf"^{LABEL_PATTERN}\+{LABEL_PATTERN}\+(\d+)\+(\d+)(?:\+{LABEL_PATTERN})?\.parquet$",
    re.ASCII)


def named_partition(path: str) -> int | None:
    """The partition the name of the file at ``path`` says, if it is shaped like an
    exporter data file's (a :class:`FileName`, or a name :func:`misnamed` finds)."""
    m = _SHAPED_LIKE_DATA.fullmatch(path.rpartition("/")[2])
    return int(m[1]) if m is not None else None


def misnamed(path: str) -> Disagreement | None:
    """The finding for a file whose name is shaped like an exporter data file's but is
    not one (a partition not of 5 digits, a first offset not of 20): the exporter's resume
    never reads it, so its rows are held where no chain sees them. None for any other
    name."""
    name = path.rpartition("/")[2]
    m = _SHAPED_LIKE_DATA.fullmatch(name)
    if m is None or FileName.parse(name) is not None:
        return None
    partition, first = m[1], m[2]
    return Disagreement(path, (
        f"named like an exporter file but not one: partition {partition} ({len(partition)} "
        f"digits, 5 expected), first offset {first} ({len(first)} digits, 20 expected); the "
        "exporter's resume never reads it",))


@dataclass(frozen=True)
class Unreadable:
    """A visible file that cannot be read, and why in words ("not a Parquet file: " and
    pyarrow's reason)."""

    path: str
    problem: str

    def describe(self) -> str:
        return f"{self.path}: {self.problem}"

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "what": self.describe()}
