"""verify over a root the JVM exporter wrote: its rows count, its heartbeats apart."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from garmexport.storage.local import LocalStorage
from garmexport.verify.count import compare, read_output
from garmexport.verify.jvm_files import heartbeat_mask, read_jvm
from tests.jvm_root import Rec, build, generated, write_jvm_file


class _Record:
    def __init__(self, r: Rec) -> None:
        self._r = r

    def value(self):
        return self._r.value

    def offset(self):
        return self._r.offset

    def timestamp(self):
        return (1, self._r.kafka_ms)

    def key(self):
        return None


def _expected(records):
    from garmexport.verify.count import expected_from_records

    return {p: expected_from_records(p, [_Record(r) for r in recs]) for p, recs in records.items()}


def test_jvm_rows_count_once_heartbeats_apart_and_its_gaps_and_duplicates_show(tmp_path: Path) -> None:
    records = generated(2000, partitions=2, days=3)
    built = build(tmp_path, records, rows_per_file=60, heartbeat_every=50,
                  old_name_day="2026-11-01")
    assert sum(len(v) for v in built.heartbeats.values()) > 10
    expected = _expected(records)
    storage = LocalStorage(str(tmp_path), "t")
    held, files = read_output(storage, "garmadon")
    assert files == 0
    jvm = read_jvm(storage, held)
    report = compare(held, files + jvm.files, expected, jvm)
    assert report.ok, report.to_dict()
    assert report.jvm_files == len(built.files)
    for p in (0, 1):
        r = report.partitions[p]
        assert r.heartbeats == sum(len(v) for (o, pp), v in built.heartbeats.items() if pp == p)
        assert r.jvm_rows == r.rows == r.broker_records > 0.99 * len(records[p])

    # the JVM exporter's own faults: a file lost (a gap) and a file written twice
    lost, twice = built.files[3], built.files[7]
    table = pq.read_table(lost)
    lost_offsets = set(table.filter(pc.invert(heartbeat_mask(table))).column("kafka_offset").to_pylist())
    lost.unlink()
    write_jvm_file(twice.parent / (twice.name.split(".index=")[0] + ".index=99"), [pq.read_table(twice)])
    write_jvm_file(tmp_path / "fs" / "day=2026-11-02" / "0.cluster=other.index=1", [pq.read_table(twice)])
    held, _ = read_output(storage, "garmadon")
    jvm = read_jvm(storage, held)
    report = compare(held, jvm.files, expected, jvm)
    p_lost = int(lost.name.split(".")[0])
    gap_offsets = {o for g in report.partitions[p_lost].gaps for o in range(g.first, g.last + 1)}
    assert set(report.partitions[p_lost].missing) == lost_offsets <= gap_offsets
    dup = report.partitions[int(twice.name.split(".")[0])].duplicate_files
    assert dup and all(str(twice.relative_to(tmp_path)) in g.files for g in dup)
    assert report.foreign_jvm_files == ["fs/day=2026-11-02/0.cluster=other.index=1"]


def test_a_jvm_file_without_kafka_offset_is_listed_unreadable_not_a_crash(tmp_path: Path) -> None:
    import pyarrow as pa

    write_jvm_file(tmp_path / "fs" / "day=2026-11-02" / "0.index=1",
                   [pa.table({"timestamp": pa.array([1, 2], pa.int64())})])
    storage = LocalStorage(str(tmp_path), "t")
    held, _ = read_output(storage, "garmadon")
    jvm = read_jvm(storage, held)
    assert jvm.files == 0 and not held
    assert [u.describe() for u in jvm.unreadable] == [
        "fs/day=2026-11-02/0.index=1: a Parquet file without the column kafka_offset"]
