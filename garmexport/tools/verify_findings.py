"""Which files a problem that ``garmexport verify`` found is about. Pure: no I/O.

An operator who reads "1200 duplicates" or "300 missing" next has to find the files. Two
findings name them, from what :func:`garmexport.tools.verify.read_output` gathered (per
(partition, offset) the paths of the files holding it, one per row):

- a **duplicate group**: offsets of one partition held by the same set of files, as a
  range (first..last) and a count. A file listed twice holds the offset twice itself.
- a **gap**: missing offsets of one partition and one dataset (where the broker's record
  says the row belongs) with no row of that dataset between them; ``before`` and ``after``
  are the files of that dataset holding its nearest offsets below and above the gap (None
  at either end of the partition). The lost rows would have been written between those two.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


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


def gaps(missing: Mapping[int, Mapping[int, str]], held: Held) -> dict[int, list[Gap]]:
    """Per partition, its missing offsets (offset -> the dataset that should hold it) as
    gaps bordered by files; one pass over ``held`` for all partitions."""
    rows: dict[int, dict[str, list[int]]] = {p: {} for p, m in missing.items() if m}
    for (p, o), paths in held.items():
        by_dataset = rows.get(p)
        if by_dataset is not None:
            for dataset in {dataset_of(path) for path in paths}:
                by_dataset.setdefault(dataset, []).append(o)
    out: dict[int, list[Gap]] = {}
    for p, by_dataset in rows.items():
        for offsets in by_dataset.values():
            offsets.sort()
        out[p] = _partition_gaps(p, missing[p], by_dataset, held)
    return out


def _partition_gaps(p: int, missing: Mapping[int, str], by_dataset: Mapping[str, list[int]],
                    held: Held) -> list[Gap]:
    found: list[Gap] = []
    open_gaps: dict[str, list] = {}  # dataset -> [dataset, first, last, count, below, above]
    for o in sorted(missing):
        dataset = missing[o]
        offsets = by_dataset.get(dataset, [])
        i = bisect.bisect_left(offsets, o)
        below = offsets[i - 1] if i else None
        above = offsets[i] if i < len(offsets) else None
        gap = open_gaps.get(dataset)
        if gap is not None and gap[4:] == [below, above]:
            gap[2], gap[3] = o, gap[3] + 1
            continue
        if gap is not None:
            found.append(_gap(p, gap, held))
        open_gaps[dataset] = [dataset, o, o, 1, below, above]
    found.extend(_gap(p, gap, held) for gap in open_gaps.values())
    return sorted(found, key=lambda g: (g.first, g.dataset))


def _gap(p: int, g: list, held: Held) -> Gap:
    dataset, first, last, count, below, above = g

    def file_at(offset: int | None) -> str | None:
        if offset is None:
            return None
        return next(f for f in held[(p, offset)] if dataset_of(f) == dataset)

    return Gap(dataset, first, last, count, file_at(below), file_at(above))
