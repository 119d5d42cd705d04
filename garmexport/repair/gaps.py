"""``garmexport repair`` (gaps): which missing records to fill, which to leave. Pure.

The caller (:mod:`garmexport.cli.repair`) gathers, in this order:

1. the committed state of every partition (:func:`garmexport.pipeline.recovery.
   read_partition_state`, the exporters' own resume);
2. the rows the output holds (:func:`garmexport.verify.count.read_output`, as ``verify``);
3. the topic, up to its end as that read began (:mod:`garmexport.kafka.partition_end`;
   records after it came in meanwhile and are the exporters'): each record no row holds is
   routed by the exporter's rules (:func:`garmexport.pipeline.router.route`, the
   configured window) into one :class:`~garmexport.pipeline.router.OriginBatch` per
   (partition, origin).

The plan (:func:`plan`) then sorts every missing record:

- **fill**: its offset is at or below W of its origin in the state of step 1. The exporters
  skip it for ever (DESIGN.md 4.5), so repair is the only writer it can have. The state is
  read before the output: every record it calls committed sat in a published file before
  the listing began, so a record at or below W that the listing misses is truly missing,
  not published in between.
- **in flight**: above W. A running (or the next) exporter writes it: left alone.
- **lost**: offsets below the broker's first offset (retention) that no row holds, above
  the partition's lowest held offset. The broker cannot say any more whether each was a
  record of an exported type (lost for good) or of a type that is not exported.

What a fill publishes, and under which names, is the exporter writer's business
(:class:`~garmexport.pipeline.origin_writer.OriginWriter`: decode, quarantine, Parquet,
footer, the exclusive publish), fed the records of one (partition, origin) as one batch:
the names follow from the records alone (DESIGN.md 4.13).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from garmexport.pipeline.placement import places
from garmexport.pipeline.router import OriginBatch
from garmexport.protocol.naming import day_name
from garmexport.protocol.resume import PartitionState


@dataclass(frozen=True, order=True)
class Stretch:
    """Records of one partition for one place (a dataset or ``_quarantine``) and day:
    the lowest and highest offset and how many (not a contiguous range: other places'
    records sit between them)."""

    place: str
    day: str
    partition: int
    first: int
    last: int
    count: int

    def describe(self) -> str:
        return f"partition {self.partition} offsets {self.first}..{self.last} ({self.count})"


@dataclass(frozen=True, order=True)
class Run:
    """Consecutive offsets first..last of one partition (every offset between them)."""

    partition: int
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class Fill:
    """The records of one (partition, origin) to publish, as the router made them."""

    partition: int
    origin: str
    batch: OriginBatch


@dataclass
class Plan:
    fills: list[Fill] = field(default_factory=list)
    #: what the fills add, per place, day and partition, where the writer will put each
    #: record (a body that fails to decode: the quarantine, as in the exporter)
    adds: list[Stretch] = field(default_factory=list)
    in_flight: list[Stretch] = field(default_factory=list)
    lost: list[Run] = field(default_factory=list)
    #: partitions without a marker: nothing in them counts as committed
    unmarked: list[int] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(s.count for s in self.adds)

    def by_place(self, stretches: Iterable[Stretch]) -> dict[tuple[str, str], list[Stretch]]:
        """``stretches`` grouped per (place, day), in that order."""
        out: dict[tuple[str, str], list[Stretch]] = {}
        for s in sorted(stretches):
            out.setdefault((s.place, s.day), []).append(s)
        return out


def select(batch: OriginBatch, keep: np.ndarray) -> OriginBatch:
    """The records of ``batch`` where the boolean array ``keep`` is true, in order."""
    at = np.flatnonzero(keep)
    index = {old: new for new, old in enumerate(at.tolist())}
    values = [batch.values[i] for i in at.tolist()]
    return OriginBatch(
        batch.offsets[at], values, batch.kafka_ts[at], batch.days[at],
        [(index[i], reason, detail, key) for i, reason, detail, key in batch.bad if i in index],
        sum(len(v) for v in values if v is not None))


def stretches(partition: int, origin: str, batch: OriginBatch) -> list[Stretch]:
    """Where the records of ``batch`` go, by the writer's rule
    (:func:`garmexport.pipeline.placement.places`): their origin's dataset on their event
    day, or the quarantine on their Kafka day (a bad head, body or event time)."""
    found: dict[tuple[str, str], list[int]] = {}
    for offset, (place, day) in zip(batch.offsets.tolist(), places(origin, batch)):
        key = (place, day_name(day))
        got = found.get(key)
        if got is None:
            found[key] = [offset, offset, 1]
        else:
            got[0], got[1], got[2] = min(got[0], offset), max(got[1], offset), got[2] + 1
    return [Stretch(place, day, partition, *got) for (place, day), got in found.items()]


def lost_runs(partition: int, held: Iterable[int], broker_first: int) -> list[Run]:
    """Offsets of ``partition`` below ``broker_first`` (the broker's first offset: what
    retention left) that no row holds, from the lowest ``held`` offset on: records the
    broker can no longer give. Offsets below every held one were never exported (a first
    run that started later) and are not counted."""
    below = sorted(o for o in set(held) if o < broker_first)
    runs: list[Run] = []
    for here, after in zip(below, [*below[1:], broker_first]):
        if after > here + 1:
            runs.append(Run(partition, here + 1, after - 1))
    return runs


def plan(missing: Mapping[tuple[int, str], OriginBatch], states: Mapping[int, PartitionState],
         lost: Iterable[Run] = ()) -> Plan:
    """The plan for the ``missing`` records (per (partition, origin), as routed) given the
    committed ``states`` of step 1 (a partition absent from it has no marker)."""
    out = Plan(lost=sorted(lost))
    for (partition, origin), batch in sorted(missing.items()):
        if not len(batch.offsets):
            continue
        state = states.get(partition, PartitionState(partition))
        if not state.has_marker and partition not in out.unmarked:
            out.unmarked.append(partition)
        below = batch.offsets <= state.low_of(origin)
        if below.any():
            fill = select(batch, below)
            out.fills.append(Fill(partition, origin, fill))
            out.adds += stretches(partition, origin, fill)
        if not below.all():
            out.in_flight += stretches(partition, origin, select(batch, ~below))
    out.adds.sort()
    out.in_flight.sort()
    return out
