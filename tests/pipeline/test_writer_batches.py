"""A writer's files hold what a record-by-record model of it says, batch after batch.

The writer sorts a batch's records by day with numpy and decodes them in that order in one
go; the model here takes the records one at a time, decodes each alone with the reference
decoder, and deals it to its day's chain (or to the quarantine chain of its Kafka day),
skipping what the resume state says is published. Files are cut at ``max_file_rows`` rows of
a chain. Cases: one day and many days, bad records at the edges of a batch and of a day,
batches of bad records only, rows already committed.
"""

from __future__ import annotations

import random
import struct
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.settings.load import load_config
from garmexport.pipeline.messages import Batch
from garmexport.pipeline.origin_writer import OriginWriter
from garmexport.protocol.naming import DATA, QUARANTINE, FileName, day_name
from garmexport.protocol.resume import OriginState
from garmexport.storage.local import LocalStorage
from garmexport.wire import columns_reference
from garmexport.wire.events import HEADER, REGISTRY
from tests.hypothesis_profiles import examples

FS = REGISTRY[1]
DAY = 20_400
MS_PER_DAY = 86_400_000
PARTITION = 3
HEADERS = [HEADER(hostname=f"h{k}", application_id=f"app_{k % 3}").SerializeToString()
           for k in range(4)]
BAD_HEADER, BAD_BODY = b"\x0a\x05ab", b"\x5b\x44"
OUT_OF_WINDOW = "timestamp_out_of_window"


def record(offset: int, day: int, kind: str, kafka_day: int) -> tuple:
    """(offset, value, kafka_ts, day, routed bad) of one record of kind good, body, header
    (failing to decode) or routed (routed bad)."""
    header = BAD_HEADER if kind == "header" else HEADERS[offset % len(HEADERS)]
    body = BAD_BODY if kind == "body" else FS.message(uri=f"u{offset}").SerializeToString()
    value = struct.pack(">iqii", FS.marker, day * MS_PER_DAY + offset, len(header),
                        len(body)) + header + body
    return offset, value, kafka_day * MS_PER_DAY + offset, day, kind == "routed"


def batch(records: list[tuple]) -> Batch:
    bad = tuple((i, OUT_OF_WINDOW, "test", None) for i, r in enumerate(records) if r[4])
    return Batch(1, records[-1][0], tuple(r[0] for r in records), tuple(r[1] for r in records),
                 tuple(r[2] for r in records), tuple(r[3] for r in records), bad,
                 sum(len(r[1]) for r in records))


def model(batches: list[list[tuple]], state: OriginState, max_rows: int):
    """Per chain, the files (lists of rows as dicts) the writer should publish."""
    rows: dict[tuple[str, str], list] = {}
    for records in batches:
        for offset, value, kafka_ts, day, routed in records:
            if routed:
                key, reason = (QUARANTINE, day_name(kafka_ts // MS_PER_DAY)), OUT_OF_WINDOW
            else:
                table, failures = columns_reference.decode_batch(FS, [value], PARTITION, [offset])
                if failures:
                    key = (QUARANTINE, day_name(kafka_ts // MS_PER_DAY))
                    reason = failures[0][1].reason.value
                else:
                    key, reason = (DATA, day_name(day)), None
            if offset <= max(state.low, state.last.get(key, -1)):
                continue  # published before
            row = table.to_pylist()[0] if key[0] == DATA else {"kafka_offset": offset,
                                                                 "reason": reason}
            rows.setdefault(key, []).append(row)
    return {key: [r[i:i + max_rows] for i in range(0, len(r), max_rows)]
            for key, r in rows.items()}


def published(root: Path) -> dict[tuple[str, str], list]:
    """Per chain, its files' rows, in file name (first offset) order."""
    out: dict[tuple[str, str], list] = {}
    for path in sorted(root.glob("**/*.parquet"), key=lambda p: p.name):
        name = FileName.parse(path.name)
        assert name is not None and name.partition == PARTITION
        kind = QUARANTINE if name.origin is not None else DATA
        day = path.parent.name.removeprefix("day=")
        table = pq.read_table(path)
        if kind == QUARANTINE:
            table = table.select(["kafka_offset", "reason"])
        assert name.first_offset == table.column("kafka_offset")[0].as_py()
        out.setdefault((kind, day), []).append(table.to_pylist())
    return out


def run_writer(root: Path, batches: list[list[tuple]], state: OriginState, max_rows: int):
    cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(root),
                             "GARMEXPORT_WRITER_MAX_FILE_ROWS": str(max_rows)})
    w = OriginWriter(cfg, LocalStorage(str(root), "x"), FS.output, PARTITION,
                     clock=lambda: 0.0)
    w.reset(1, state, -1)
    reports = [w.handle_batch(batch(records)) for records in batches if records]
    reports.append(w.flush())
    assert not any(r.fenced_path for r in reports)
    return reports


def check(root: Path, batches: list[list[tuple]], state: OriginState = OriginState(-1, {}),
          max_rows: int = 1_000_000) -> None:
    reports = run_writer(root, batches, state, max_rows)
    expected = model(batches, state, max_rows)
    assert published(root) == expected
    n = sum(len(b) for b in batches)
    assert sum(r.rows_in for r in reports) == n
    kept = sum(len(rows) for files in expected.values() for rows in files)
    assert n - kept == sum(r.skipped for r in reports)


def records_of(days: list[int], kinds: dict[int, str] | None = None, first: int = 100,
               kafka_day: int = DAY + 9) -> list[tuple]:
    kinds = kinds or {}
    return [record(first + i, d, kinds.get(i, "good"), kafka_day) for i, d in enumerate(days)]


def test_one_day_with_no_bad_record(tmp_path):
    check(tmp_path, [records_of([DAY] * 50)])


def test_many_days_interleaved(tmp_path):
    rng = random.Random(3)
    check(tmp_path, [records_of([DAY + rng.randrange(12) for _ in range(300)])])


@pytest.mark.parametrize("where", ["first", "last", "day_edges", "both_ends_of_each_kind"])
def test_bad_records_at_the_edges_of_a_batch_and_of_a_day(tmp_path, where):
    days = [DAY + 2] * 10 + [DAY] * 10 + [DAY + 1] * 10 + [DAY] * 10
    kinds = {"first": {0: "body"}, "last": {39: "header"},
             "day_edges": {9: "body", 10: "body", 19: "header", 20: "routed", 29: "body",
                           30: "header", 39: "body"},
             "both_ends_of_each_kind": {0: "routed", 1: "body", 2: "header", 37: "header",
                                        38: "body", 39: "routed"}}[where]
    check(tmp_path, [records_of(days, kinds)])


@pytest.mark.parametrize("kind", ["routed", "body", "header", "mixed"])
def test_a_batch_of_bad_records_only(tmp_path, kind):
    kinds = ["routed", "body", "header"]
    days = [DAY + i % 3 for i in range(30)]
    check(tmp_path, [records_of(days, {i: kind if kind != "mixed" else kinds[i % 3]
                                       for i in range(30)})])


def test_rows_already_committed_are_skipped_per_chain(tmp_path):
    days = [DAY + i % 4 for i in range(80)]
    kinds = {i: "body" for i in range(0, 80, 7)} | {i: "routed" for i in range(3, 80, 11)}
    state = OriginState(120, {(DATA, day_name(DAY + 1)): 160, (DATA, day_name(DAY + 3)): 179,
                              (QUARANTINE, day_name(DAY + 9)): 150})
    check(tmp_path, [records_of(days, kinds)], state)


def test_every_row_of_a_batch_already_committed(tmp_path):
    check(tmp_path, [records_of([DAY, DAY + 1] * 20, {5: "body"})], OriginState(1000, {}))


def test_files_are_cut_at_max_rows_across_batches(tmp_path):
    rng = random.Random(5)
    batches, first = [], 100
    for _ in range(4):
        days = [DAY + rng.randrange(3) for _ in range(40)]
        kinds = {rng.randrange(40): rng.choice(["body", "header", "routed"]) for _ in range(4)}
        batches.append(records_of(days, kinds, first))
        first += 40
    check(tmp_path, batches, max_rows=7)


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_any_batches_land_as_the_record_by_record_model_says(data):
    n_days = data.draw(st.integers(1, 5))
    kind = st.sampled_from(["good"] * 6 + ["body", "header", "routed"])
    batches, first = [], 0
    for _ in range(data.draw(st.integers(1, 3))):
        size = data.draw(st.integers(1, 40))
        days = data.draw(st.lists(st.integers(DAY, DAY + n_days - 1), min_size=size,
                                  max_size=size))
        kinds = data.draw(st.lists(kind, min_size=size, max_size=size))
        batches.append([record(first + i, d, k, DAY + 7) for i, (d, k) in
                        enumerate(zip(days, kinds))])
        first += size + data.draw(st.integers(0, 3))
    low = data.draw(st.integers(-1, first))
    last = {(DATA, day_name(d)): data.draw(st.integers(-1, first))
            for d in data.draw(st.sets(st.integers(DAY, DAY + n_days - 1)))}
    max_rows = data.draw(st.sampled_from([3, 10, 1_000_000]))
    with tempfile.TemporaryDirectory() as root:
        check(Path(root), batches, OriginState(low, last), max_rows)


def test_the_model_deals_records_as_the_rules_say():
    records = records_of([DAY, DAY + 1, DAY, DAY + 1], {1: "body", 2: "header", 3: "routed"})
    files = model([records], OriginState(-1, {}), 10)
    assert sorted(files) == [(DATA, day_name(DAY)), (QUARANTINE, day_name(DAY + 9))]
    [[row]] = files[(DATA, day_name(DAY))]
    assert (row["kafka_offset"], row["uri"], row["hostname"]) == (100, "u100", "h0")
    assert files[(QUARANTINE, day_name(DAY + 9))] == [[
        {"kafka_offset": 101, "reason": "bad_body"}, {"kafka_offset": 102, "reason": "bad_header"},
        {"kafka_offset": 103, "reason": OUT_OF_WINDOW}]]
