"""Reading a JVM exporter's root: the offsets it committed, footers read once, markers first."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from garmexport.errors import ProtocolViolation
from garmexport.pipeline.jvm_recovery import JvmScan, holds_jvm_files
from garmexport.pipeline.recovery import read_partition_state
from garmexport.pipeline.router import exported_origins
from garmexport.protocol.naming import MarkerName, partition_dir
from garmexport.protocol.resume import Marker
from garmexport.storage.local import LocalStorage
from garmexport.offsets.table import build_row, render
from tests.jvm_root import build, generated, heartbeat_rows, write_jvm_file


class CountingStorage(LocalStorage):
    def __init__(self, root: str) -> None:
        super().__init__(root, "t")
        self.tails = 0

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:
        self.tails += 1
        return super().read_tail(path, nbytes, size)


@pytest.fixture(scope="module")
def records():
    return generated(3000, partitions=2, days=3)


def test_each_type_resumes_after_the_highest_offset_over_every_day_old_names_and_heartbeats(
        tmp_path: Path, records) -> None:
    built = build(tmp_path, records, rows_per_file=50, old_name_day="2026-10-31",
                  heartbeat_every=97, skip_origins=["flink_kafka_consumer"])
    assert any(f.parent.name == "2026-10-31" for f in built.files)  # an old-era day exists
    storage = CountingStorage(str(tmp_path))
    scan = JvmScan(storage, exported_origins())
    for p in (0, 1):
        found = scan.found(p)
        want = {o: built.high(o, p) for o in exported_origins() if built.high(o, p) is not None}
        assert {o: f.offset for o, f in found.items()} == want
        assert "flink_kafka_consumer" not in found
        for o, f in found.items():
            assert (tmp_path / f.path).exists() and f.path.startswith(f"{o}/")
    newest = {(f.parent.parent.name, f.parent.name, f.name.split(".")[0]) for f in built.files}
    assert storage.tails == scan.footers_read == len(newest)  # one footer per (type, day, p)
    scan.found(0)
    assert storage.tails == len(newest)  # asked again: nothing read again
    assert scan.partitions() == [0, 1]  # what offsets --no-broker shows on a JVM root

    rec = read_partition_state(storage, "local", "garmadon", 1, scan)
    assert rec.state.seek() == min(built.high(o, 1) for o in rec.jvm) + 1
    assert rec.markers == {}
    # garmexport offsets tells it before doing it: per type the offset and its file
    row = build_row(1, rec, end=10**6)
    assert row.seek == rec.state.seek() and row.lag == 10**6 - row.seek
    text = render("local", "garmadon", [row])
    assert "resumes where the JVM exporter stopped" in text
    for o, f in rec.jvm.items():
        assert f"after {f.offset}" in text and f.path in text
        assert row.to_dict()["jvm"][o] == {"offset": f.offset, "file": f.path}


def test_a_partition_with_a_garmexport_marker_reads_no_jvm_footer(tmp_path: Path, records) -> None:
    build(tmp_path, records, rows_per_file=200)
    storage = CountingStorage(str(tmp_path))
    marker = Marker(0, {"fs": 5}, {}, processed=5, written_at_ms=1)
    storage.put_exclusive(f"{partition_dir('local', 'garmadon', 0)}/"
                          f"{MarkerName('i1', 1).format()}", marker.to_json())
    scan = JvmScan(storage, exported_origins())
    rec = read_partition_state(storage, "local", "garmadon", 0, scan)
    assert rec.state.seek() == 6 and rec.jvm == {} and storage.tails == 0


def test_files_of_another_cluster_tag_never_set_our_offsets(tmp_path: Path, records) -> None:
    built = build(tmp_path, records, rows_per_file=200, cluster="new")
    schema = pq.read_schema(next(f for f in built.files if f.parts[-3] == "fs")).remove_metadata()
    write_jvm_file(tmp_path / "fs" / "day=2026-11-02" / "0.cluster=old.index=7",
                   [heartbeat_rows(schema, [10**9], [1_793_600_000_000])])
    write_jvm_file(tmp_path / "fs" / "day=2026-11-02" / "0.index=7",
                   [heartbeat_rows(schema, [10**9], [1_793_600_000_000])])
    ours = JvmScan(LocalStorage(str(tmp_path), "t"), exported_origins(), "new").found(0)
    assert ours["fs"].offset == built.high("fs", 0) < 10**9
    untagged = JvmScan(LocalStorage(str(tmp_path), "t"), exported_origins(), "").found(0)
    assert untagged["fs"].offset == 10**9 and set(untagged) == {"fs"}


def test_an_unreadable_jvm_file_stops_the_start_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "gc" / "day=2026-11-02" / "0.index=1"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not parquet")
    with pytest.raises(ProtocolViolation, match="gc/day=2026-11-02/0.index=1"):
        JvmScan(LocalStorage(str(tmp_path), "t"), exported_origins()).found(0)


def test_a_start_after_the_takeover_refuses_while_the_jvm_exporter_still_writes(
        tmp_path: Path, records) -> None:
    from garmexport.protocol.naming import TAKEOVER_FILE

    built = build(tmp_path, records, rows_per_file=200)
    storage = LocalStorage(str(tmp_path), "t")
    takeover = JvmScan(storage, exported_origins()).takeover(0)
    assert takeover is not None and takeover.found["fs"].offset == built.high("fs", 0)
    pdir = partition_dir("local", "garmadon", 0)
    storage.put_exclusive(f"{pdir}/{TAKEOVER_FILE}", takeover.to_json())
    storage.put_exclusive(f"{pdir}/{MarkerName('i1', 1).format()}",
                          Marker(0, {"fs": 5}, {}, processed=5, written_at_ms=1).to_json())
    rec = read_partition_state(storage, "local", "garmadon", 0, JvmScan(storage, exported_origins()))
    assert rec.takeover == takeover and rec.jvm == {}
    # the JVM exporter merges more rows into the newest file of the partition's fs day
    path = tmp_path / takeover.found["fs"].path
    table = pq.read_table(path)
    write_jvm_file(path, [table, heartbeat_rows(table.schema.remove_metadata(),
                                                [10**6], [1_793_600_000_000])])
    with pytest.raises(ProtocolViolation, match=r"JVM exporter wrote .* after garmexport took"):
        read_partition_state(storage, "local", "garmadon", 0, JvmScan(storage, exported_origins()))


def test_a_root_holds_jvm_files_when_its_oldest_or_newest_day_of_a_type_has_one(
        tmp_path: Path, records) -> None:
    origins = exported_origins()
    assert not holds_jvm_files(LocalStorage(str(tmp_path), "t"), origins)  # empty root
    # garmexport's own files in day directories are not the JVM exporter's
    own = tmp_path / "own" / origins[0] / "day=2026-11-01"
    own.mkdir(parents=True)
    (own / "local+garmadon+00000+00000000000000000000.parquet").write_bytes(b"x")
    assert not holds_jvm_files(LocalStorage(str(tmp_path / "own"), "t"), origins)
    built = build(tmp_path / "jvm", records, rows_per_file=400)
    assert holds_jvm_files(LocalStorage(str(tmp_path / "jvm"), "t"), origins)
    # taken over: the newest days hold garmexport's files only, the oldest the JVM's
    days = sorted({f.parent for f in built.files})
    newest = max(d.name for d in days)
    for f in built.files:
        if f.parent.name == newest:
            f.unlink()
    assert holds_jvm_files(LocalStorage(str(tmp_path / "jvm"), "t"), origins)
    for f in built.files:
        f.unlink(missing_ok=True)
    assert not holds_jvm_files(LocalStorage(str(tmp_path / "jvm"), "t"), origins)
