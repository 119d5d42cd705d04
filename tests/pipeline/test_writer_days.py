"""One batch whose records fall on several days, with bad records among them.

The writer decodes a batch in (day, offset) order and cuts the decoded table into one
slice per day; this checks that every good record lands in its day's file, in offset
order, and every bad one (routed bad, or failing to decode) in quarantine, none lost.
"""

from __future__ import annotations

import random

import pyarrow.parquet as pq

from garmexport.settings.load import load_config
from garmexport.wire.events import REGISTRY, HEADER
from garmexport.wire.frames import encode
from garmexport.pipeline.messages import Batch
from garmexport.protocol.naming import day_name
from garmexport.pipeline.held_rows import Packed
from garmexport.pipeline.origin_writer import OriginWriter
from garmexport.protocol.resume import OriginState
from garmexport.storage.local import LocalStorage

FS = REGISTRY[1]
DAY = 20_400
MS_PER_DAY = 86_400_000


def test_records_of_several_days_with_bad_ones_land_in_their_days_in_offset_order(tmp_path):
    rng = random.Random(7)
    cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(tmp_path)})
    w = OriginWriter(cfg, LocalStorage(str(tmp_path), "x"), FS.output, 3)
    w.reset(1, OriginState(-1, {}), -1)
    header = HEADER(hostname="h").SerializeToString()
    offsets, values, days, bad = [], [], [], []
    expected: dict[int, list[int]] = {}
    quarantined = []
    for i, offset in enumerate(range(1000, 1600)):
        day = DAY + rng.choice((0, 0, 0, 1, 2))
        body = FS.message(uri=f"u{offset}").SerializeToString()
        kind = rng.random()
        if kind < 0.05:  # routed bad (say, out of window)
            bad.append((i, "timestamp_out_of_window", "test", None))
            quarantined.append(offset)
        elif kind < 0.1:  # a body that does not parse: found by the decoder
            body = b"\x0a\x05ab"
            quarantined.append(offset)
        else:
            expected.setdefault(day, []).append(offset)
        offsets.append(offset)
        values.append(encode(FS.marker, day * MS_PER_DAY + 1000, header, body))
        days.append(day)
    report = w.handle_batch(Batch(1, 1599, tuple(offsets), tuple(values), (DAY * MS_PER_DAY,) * 600,
                                  tuple(days), tuple(bad), sum(map(len, values))))
    assert not report.fenced_path
    w.flush()
    for day, want in expected.items():
        [path] = (tmp_path / FS.output / f"day={day_name(day)}").glob("*.parquet")
        table = pq.read_table(path)
        assert table.column("kafka_offset").to_pylist() == want
        assert table.column("uri").to_pylist() == [f"u{o}" for o in want]
    got_bad = sorted(o for f in tmp_path.glob("_quarantine/**/*.parquet")
                     for o in pq.read_table(f).column("kafka_offset").to_pylist())
    assert got_bad == quarantined


def test_open_files_hold_no_more_memory_than_twice_what_they_account_for(tmp_path):
    """A day's slice of a batch would keep the whole batch's memory alive while the
    memory budget counts only its rows: the writer packs small and pinning slices."""
    cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(tmp_path)})
    w = OriginWriter(cfg, LocalStorage(str(tmp_path), "x"), FS.output, 0)
    w.reset(1, OriginState(-1, {}), -1)
    header = HEADER(hostname="h").SerializeToString()
    days = [DAY] * 4000 + [DAY + 1] * 20 + [DAY + 2] * 3  # two small late-day slices
    values = [encode(FS.marker, d * MS_PER_DAY + 5, header,
                     FS.message(uri=f"u{i}").SerializeToString()) for i, d in enumerate(days)]
    w.handle_batch(Batch(1, len(days) - 1, tuple(range(len(days))), tuple(values),
                         (DAY * MS_PER_DAY,) * len(days), tuple(days), (), sum(map(len, values))))
    assert len(w._files.keys()) == 3
    for key in w._files.keys():
        f = w._files.get(key)
        held = sum(len(m) for p in f.pieces if isinstance(p, Packed) for m in p.messages)
        held += sum(p.get_total_buffer_size() for p in f.pieces if not isinstance(p, Packed))
        assert held <= f.held, (key, held, f.held)
        assert f.held <= 2 * max(f.nbytes, 4096), (key, f.held, f.nbytes)
