"""The compaction plan of one (output, day): which files fold into which outputs (pure).

Input: the day's files as listed and read from their footers/sidecars, the low watermark
W(type, partition) of every (source, topic, partition) from the markers, the generation to
write, the target size. Output: a :class:`DayPlan` naming every compacted output, its inputs
and their Kafka offset ranges, and the files left alone with the reason.

Invariants (the safety rule, DESIGN.md 6 and 4.5):

- A raw file is folded only if every range in it ends at or below W of its (source, topic,
  partition) for this output: the exporter then never re-exports those offsets (it skips
  offset <= W) and never needs the file's name for fencing (fencing only concerns files
  whose first offset is above W). Files above W, or of a partition with no W, are left
  alone: a later run folds them.
- A compacted output holds one feed (source, topic) only, so its name names the feed.
- Existing compacted files are rewritten only when undersized (< target / 2), and only
  together with at least one raw file: late files merge into the day's small remainder
  instead of rewriting large files for a few rows.
- Inputs are taken in (partition, first offset) order and packed greedily up to the target
  (by input bytes: a rewrite is at most about as large as its inputs); a file larger than
  the target forms an output alone. Every input is in exactly one output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from garmexport.compaction.names import CompactedName, parse_view
from garmexport.compaction.rewrite import rewritable

#: (source, topic, partition) -> W of this output's type in that partition
Watermarks = Mapping[tuple[str, str, int], int]


@dataclass(frozen=True, order=True)
class Range:
    """Offsets first..last (inclusive) of one Kafka partition held in a file, and its rows."""

    partition: int
    first_offset: int
    last_offset: int
    rows: int


@dataclass(frozen=True)
class InputFile:
    """One file of the day dir: raw (one range) or compacted (the ranges of its sidecar)."""

    name: str
    source: str
    topic: str
    size: int
    ranges: tuple[Range, ...]
    compacted: bool = False
    #: equal for files with the same Parquet schema: one file per key is enough for Spark
    #: to infer the union schema of a day (a compacted file gets a key of its own)
    schema_key: str = ""

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.ranges)

    def sort_key(self) -> tuple[int, int, str]:
        first = min(self.ranges) if self.ranges else Range(-1, -1, -1, 0)
        return (first.partition, first.first_offset, self.name)


@dataclass(frozen=True)
class OutputFile:
    name: CompactedName
    inputs: tuple[InputFile, ...]

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.inputs)

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.inputs)

    def ranges(self) -> tuple[Range, ...]:
        """Every input range, sorted: what a verifier needs to trace rows back to Kafka."""
        return tuple(sorted(r for f in self.inputs for r in f.ranges))


@dataclass(frozen=True)
class DayPlan:
    output: str
    day: str
    generation: int
    outputs: tuple[OutputFile, ...]
    left: tuple[tuple[str, str], ...]  # (file name, reason) of files not folded

    @property
    def inputs(self) -> tuple[InputFile, ...]:
        return tuple(f for o in self.outputs for f in o.inputs)

    def schema_samples(self) -> list[InputFile]:
        """One input per distinct schema, in input order."""
        seen: dict[str, InputFile] = {}
        for f in self.inputs:
            seen.setdefault(f.schema_key or f.name, f)
        return list(seen.values())


def is_foldable(output: str, day: str, f: InputFile, watermarks: Watermarks) -> bool:
    """Whether raw file ``f`` of a closed ``day`` may be folded: the rewrite rule
    (:func:`.rewrite.rewritable`) on its highest offset and W of ``output``."""
    if not f.ranges:
        return False

    def committed(source: str, topic: str, partition: int, origin: str) -> int | None:
        return watermarks.get((source, topic, partition)) if origin == output else None
    last = max(r.last_offset for r in f.ranges)
    return rewritable(output, day, f.name, last, committed, closed=True).ok


def next_generation(names: Sequence[str], journal_generations: Sequence[int] = ()) -> int:
    """1 + the highest generation the day has shown: its compacted names and views among
    ``names`` (the day directory's entries), and ``journal_generations`` (its journals,
    staging dirs, flip and retirement records). A generation may leave no compacted file (a
    repair that deletes a file whole) while its view is kept for the grace: taking its
    number again would fill the new view over the old one's files, and the old one's
    retirement record would have the new view deleted before its own grace."""
    gens = [n.generation for n in map(CompactedName.parse, names) if n is not None]
    views = [g for g in map(parse_view, names) if g is not None]
    return max([0, *gens, *views, *journal_generations]) + 1


def pack(files: Sequence[InputFile], target_bytes: int) -> list[list[InputFile]]:
    """Greedy consecutive packing in (partition, first offset) order up to ``target_bytes``."""
    groups: list[list[InputFile]] = []
    size = 0
    for f in sorted(files, key=InputFile.sort_key):
        if groups and size + f.size <= target_bytes:
            groups[-1].append(f)
            size += f.size
        else:
            groups.append([f])
            size = f.size
    return groups


def plan_day(output: str, day: str, files: Sequence[InputFile], watermarks: Watermarks,
             generation: int, target_bytes: int) -> DayPlan:
    """The plan for one closed day (the caller checks closedness); outputs may be empty."""
    left: list[tuple[str, str]] = []
    feeds: dict[tuple[str, str], tuple[list[InputFile], list[InputFile]]] = {}
    for f in sorted(files, key=lambda f: f.name):
        raw, small = feeds.setdefault((f.source, f.topic), ([], []))
        if f.compacted:
            if f.size < target_bytes / 2:
                small.append(f)
            else:
                left.append((f.name, "compacted"))
        elif f.rows == 0:
            left.append((f.name, "empty"))
        elif is_foldable(output, day, f, watermarks):
            raw.append(f)
        else:
            left.append((f.name, "above_watermark"))
    outputs: list[OutputFile] = []
    for (source, topic), (raw, small) in sorted(feeds.items()):
        if not raw:
            left.extend((f.name, "compacted") for f in small)
            continue
        for group in pack(raw + small, target_bytes):
            name = CompactedName(source, topic, generation, len(outputs))
            outputs.append(OutputFile(name, tuple(group)))
    return DayPlan(output, day, generation, tuple(outputs), tuple(sorted(left)))
