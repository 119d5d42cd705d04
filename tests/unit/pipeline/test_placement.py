"""Where a record goes: the rule verify and repair name places by, held to the writer itself.

A record with a good head and a bad body passes the router but not the writer's decoder:
it is in the quarantine on its Kafka day, not in its type's dataset on its event day
(issue 40, item 2). :func:`places` must say where the writer really puts every record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from garmexport.pipeline.messages import Batch
from garmexport.pipeline.origin_writer import OriginWriter
from garmexport.pipeline.placement import places, quarantined
from garmexport.pipeline.router import OriginBatch, Window, route
from garmexport.protocol.naming import MS_PER_DAY, day_name
from garmexport.protocol.resume import OriginState
from garmexport.settings.load import load_config
from garmexport.storage.local import LocalStorage
from garmexport.testbed.generator import Spec, generate
from garmexport.wire import frames
from garmexport.wire.events import HEADER, by_output

NOW_MS = 1_793_700_000_000
BROKEN = b"\x0a\x7fxxxx"  # a length-delimited field announcing 127 bytes of 4
FS = by_output("fs")


@dataclass(frozen=True)
class Rec:
    o: int
    v: bytes | None
    ts: int

    def value(self) -> bytes | None:
        return self.v

    def offset(self) -> int:
        return self.o

    def timestamp(self) -> tuple[int, int]:
        return (1, self.ts)

    def key(self) -> bytes | None:
        return None


def _fs_batch(kafka_day: int, event_day: int, bodies: list[bytes]) -> OriginBatch:
    header = HEADER(hostname="h").SerializeToString()
    values: list[bytes | None] = [frames.encode(FS.marker, event_day * MS_PER_DAY + 7, header, b)
                                  for b in bodies]
    n = len(values)
    return OriginBatch(np.arange(n, dtype=np.int64), values,
                       np.full(n, kafka_day * MS_PER_DAY + 9, np.int64),
                       np.full(n, event_day, np.int64), [], sum(map(len, values)))  # type: ignore[arg-type]


def test_a_good_head_with_a_bad_body_goes_to_the_quarantine_on_its_kafka_day() -> None:
    good = FS.message(uri="u").SerializeToString()
    batch = _fs_batch(20_401, 20_398, [good, BROKEN, good])  # a late event: three days apart
    assert places("fs", batch) == [("fs", 20_398), ("_quarantine", 20_401), ("fs", 20_398)]
    assert quarantined("fs", batch) == {1}


def test_a_record_left_out_of_the_check_is_placed_by_the_router_alone() -> None:
    batch = _fs_batch(20_401, 20_398, [BROKEN, BROKEN])
    assert places("fs", batch, check=[1]) == [("fs", 20_398), ("_quarantine", 20_401)]


def test_places_are_where_the_writer_puts_every_record(tmp_path: Path) -> None:
    # every kind of bad record, late events, and a window narrow enough that some event
    # times fall out of it: each origin's batch through the real writer, then compared
    spec = Spec(now_ms=NOW_MS, seed=40, partitions=1, days=3, late_share=0.2, bad_share=0.3,
                mix={"FS_EVENT": 3, "GC_EVENT": 1, "PATH_EVENT": 0.1})  # few files to write
    produced = list(generate(spec, 2_000))
    records = [Rec(i, r.value, r.timestamp_ms) for i, r in enumerate(produced)]
    window = Window(past_ms=MS_PER_DAY, future_ms=1_000)
    cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(tmp_path)})
    said: dict[int, str] = {}
    for origin, b in route(records, {}, window).batches.items():
        said |= {o: f"{place}/day={day_name(day)}"
                 for o, (place, day) in zip(b.offsets.tolist(), places(origin, b))}
        writer = OriginWriter(cfg, LocalStorage(str(tmp_path), "t"), origin, 0, clock=lambda: 0.0)
        writer.reset(0, OriginState(-1, {}), -1)
        writer.handle(Batch(0, -1, b.offsets, tuple(b.values), b.kafka_ts, b.days,
                            tuple(b.bad), b.nbytes))
        writer.flush()
    put: dict[int, str] = {}
    for path in tmp_path.glob("*/day=*/*.parquet"):
        where = "/".join(path.relative_to(tmp_path).parts[:2])
        for o in pq.read_table(path, columns=["kafka_offset"]).column(0).to_pylist():
            assert o not in put, o
            put[o] = where
    assert put == said
    # the case of the issue: a bad body (or header) of a late event, whose Kafka day is
    # not its event day, is in the quarantine of its Kafka day
    late_bodies = [i for i, r in enumerate(produced) if r.kind in ("bad_body", "bad_header")
                   and (head := frames.read_head(r.value)) is not None
                   and not isinstance(head, frames.DecodeFailure)
                   and head[1] // MS_PER_DAY != r.timestamp_ms // MS_PER_DAY]
    assert len(late_bodies) > 5
    assert all(said[i] == f"_quarantine/day={day_name(produced[i].timestamp_ms // MS_PER_DAY)}"
               for i in late_bodies)
