"""``garmexport repair quarantine``: which quarantined records decode now (reads the output).

A record is quarantined because the version that read it could not make a row of it (an
unknown type marker, a body its schema rejected, an event time outside the window). After
an upgrade or a configuration change the same bytes may decode. Every quarantined row of
the checked topic in the chosen days is classified again by the exporter's router
(:func:`garmexport.pipeline.router.route`, today's window) and its body decoded by the
exporter's decoder (:func:`garmexport.wire.columns.decode_batch`):

- it decodes, and no dataset row holds it: it is a record to publish into its dataset.
  As in gaps (:mod:`garmexport.repair.gaps`), only at or below W of its origin in the
  state the exporters resume from (read before the quarantine: none of them writes it
  again); above W it is in flight: an exporter that knows the type reads it again from the
  broker and writes it, and the quarantine's copy goes at the next repair;
- it decodes and a dataset row holds it already: nothing to publish; the quarantine's
  copy is a duplicate the swap takes out (:func:`garmexport.repair.rows.quarantine_copies`);
- it still fails: it stays, and when its origin, reason or detail changed, its row is
  rewritten with the new ones (an update of the swap).

Rows of other topics are left as they are, and so are the rows of a quarantine file the
repair may not rewrite yet (``can``: a raw file above W of its chain, or of a day not closed,
:func:`garmexport.repair.rows.verdict`): publishing them now would leave each record
in its dataset and in the quarantine until the file can be rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from garmexport.pipeline.recovery import read_partition_state
from garmexport.pipeline.router import OriginBatch, Window, route
from garmexport.protocol.naming import QUARANTINE_DIR, FRAME_ORIGIN, parse_day_dir
from garmexport.settings.config import Config
from garmexport.storage.base import Storage
from garmexport.repair.gaps import Fill, Plan, Stretch, plan, select
from garmexport.repair.rows import Rewritable
from garmexport.verify.count import visible_files
from garmexport.verify.read_file import read_table
from garmexport.wire.columns import decode_batch
from garmexport.wire.events import by_output

Key = tuple[int, int]


@dataclass(frozen=True)
class Row:
    """A quarantined row as the router reads a consumed record (KafkaRecord)."""

    at: int
    kafka_ms: int
    k: bytes | None
    v: bytes | None

    def value(self) -> bytes | None:
        return self.v

    def offset(self) -> int:
        return self.at

    def timestamp(self) -> tuple[int, int]:
        return (1, self.kafka_ms)

    def key(self) -> bytes | None:
        return self.k


@dataclass
class Replay:
    fills: list[Fill] = field(default_factory=list)
    #: what the fills add, per dataset, day and partition (printed as gaps prints them)
    adds: list[Stretch] = field(default_factory=list)
    #: records to publish (at or below W), in flight (above it), still failing, and
    #: decoding now but already held by a dataset row
    rows: int = 0
    in_flight: int = 0
    failing: int = 0
    held: int = 0
    #: rows left for a later run: their quarantine file may not be rewritten yet (why: count)
    waiting: dict[str, int] = field(default_factory=dict)
    #: quarantine files holding a row whose reason changed (rewritten even without a drop)
    update_files: set[str] = field(default_factory=set)
    updates: dict[Key, dict[str, str]] = field(default_factory=dict)

    def by_place(self) -> dict[tuple[str, str], list[Stretch]]:
        """``adds`` per (dataset, day)."""
        return Plan(adds=self.adds).by_place(self.adds)

    def describe(self, applied: bool, filled: int) -> str:
        moved = f"published {filled}" if applied else f"would publish {self.rows}"
        return (f"quarantine: {moved} records into their datasets; {self.held} were in a "
                f"dataset already; {self.in_flight} decode now but are above their type's "
                f"committed point (an exporter writes them; run repair again after); "
                f"{self.failing} still fail ({len(self.updates)} with a new reason)"
                + "".join(f"; {n} left for a later run: {why}"
                          for why, n in sorted(self.waiting.items())))


def _rows(storage: Storage, topic: str, days: set[str], unreadable: list
          ) -> dict[int, dict[int, tuple[Row, str, tuple[str, str, str]]]]:
    """Per partition, offset -> (the row, its file, its (origin, reason, detail))."""
    out: dict[int, dict[int, tuple[Row, str, tuple[str, str, str]]]] = {}
    for place, path in visible_files(storage):
        if place != QUARANTINE_DIR:
            continue
        if days and parse_day_dir(path.split("/")[1]) not in days:
            continue
        table = read_table(storage, path, unreadable)
        if table is None:
            continue
        cols = {c: table.column(c).to_pylist() for c in
                ("topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "key",
                 "value", "origin", "reason", "detail")}
        for i, t in enumerate(cols["topic"]):
            if t != topic:
                continue
            p, o = cols["kafka_partition"][i], cols["kafka_offset"][i]
            out.setdefault(p, {})[o] = (
                Row(o, cols["kafka_timestamp"][i], cols["key"][i], cols["value"][i]), path,
                (cols["origin"][i], cols["reason"][i], cols["detail"][i]))
    return out


def replay_plan(storage: Storage, config: Config, held: Mapping[Key, list[str]],
                days: set[str], can: Callable[[str], Rewritable],
                tick: Callable = lambda text, force=False: None) -> Replay:
    """The replay of the quarantine's ``days`` (all when empty), the updates of the rows
    that still fail included (see the module docstring)."""
    src = config.source
    out = Replay()
    unreadable: list = []
    found = _rows(storage, src.topic, days, unreadable)
    verdicts: dict[str, Rewritable] = {}
    for p, by_offset in list(found.items()):
        for o, (_, path, _) in list(by_offset.items()):
            v = verdicts.get(path) or verdicts.setdefault(path, can(path))
            if not v.ok:
                out.waiting[v.why_not] = out.waiting.get(v.why_not, 0) + 1
                del by_offset[o]
        if not by_offset:
            del found[p]
    window = Window.of(config.protocol)
    missing: dict[tuple[int, str], OriginBatch] = {}
    states = {}
    for p in sorted(found):
        # the committed state before the quarantine is read again below (gaps' order)
        states[p] = read_partition_state(storage, src.cluster, src.topic, p).state
    for p, by_offset in sorted(found.items()):
        offsets = sorted(by_offset)
        routed = route([by_offset[o][0] for o in offsets], {}, window)
        for origin, batch in routed.batches.items():
            bad = {i: (reason, detail) for i, reason, detail, _ in batch.bad}
            good = np.ones(len(batch.offsets), dtype=bool)
            for i in bad:
                good[i] = False
            if origin != FRAME_ORIGIN and good.any():
                picked = select(batch, good)
                _, failures = decode_batch(by_output(origin), picked.values, p, picked.offsets)
                at = np.flatnonzero(good)
                for k, failure in failures:
                    good[at[k]] = False
                    bad[int(at[k])] = (failure.reason.value, failure.detail)
            for i, (reason, detail) in bad.items():
                o = int(batch.offsets[i])
                out.failing += 1
                _, path, was = by_offset[o]
                now = (origin, reason, detail)
                if now != was:
                    out.updates[(p, o)] = dict(zip(("origin", "reason", "detail"), now))
                    out.update_files.add(path)
            for i in np.flatnonzero(good).tolist():
                o = int(batch.offsets[i])
                if any(not c.startswith(QUARANTINE_DIR + "/") for c in held.get((p, o), [])):
                    good[i] = False
                    out.held += 1
            if good.any():
                missing[(p, origin)] = select(batch, good)
        tick(lambda s: f"decoding the quarantine again: partition {p}, {s:.0f} s")
    todo = plan(missing, states)
    out.fills, out.adds = todo.fills, todo.adds
    out.rows = todo.rows
    out.in_flight = sum(s.count for s in todo.in_flight)
    return out
