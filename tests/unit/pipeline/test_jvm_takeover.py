"""Writing a JVM takeover down ahead of the assignment: same resume state, markers only after."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from garmexport.pipeline.jvm_recovery import JvmScan
from garmexport.pipeline.jvm_takeover import before_joining, take_over, uncovered
from garmexport.pipeline.recovery import read_partition_state
from garmexport.pipeline.router import exported_origins
from garmexport.protocol.jvm_resume import takeover_marker
from garmexport.protocol.naming import TAKEOVER_FILE, MarkerName, partition_dir
from garmexport.protocol.resume import Marker
from garmexport.settings.load import load_config
from garmexport.storage.local import LocalStorage
from tests.jvm_root import build, generated
from tests.unit.pipeline.test_jvm_recovery import CountingStorage


@pytest.fixture(scope="module")
def records():
    return generated(3000, partitions=3, days=3)


def _state(storage, p: int):
    return read_partition_state(storage, "local", "garmadon", p,
                                JvmScan(storage, exported_origins())).state


def test_the_written_takeover_gives_the_assignment_the_same_state_without_a_footer(
        tmp_path: Path, records) -> None:
    build(tmp_path, {p: r for p, r in records.items() if p != 2}, rows_per_file=200,
          skip_origins=["flink_kafka_consumer"])
    storage = LocalStorage(str(tmp_path), "t")
    before = {p: _state(storage, p) for p in (0, 1, 2)}
    jvm_before = {p: JvmScan(storage, exported_origins()).found(p) for p in (0, 1)}
    seen = []
    done = take_over(storage, "local", "garmadon", [0, 1, 2], JvmScan(storage, exported_origins()),
                     progress=seen.append)
    assert [t.outcome for t in done] == ["written", "written", "no JVM file"] and seen == done
    for t in done[:2]:
        assert t.footers_read > 0 and t.seek == before[t.partition].seek()
        pdir = partition_dir("local", "garmadon", t.partition)
        assert [Path(w).name for w in t.written][0] == TAKEOVER_FILE
        assert MarkerName.parse(Path(t.written[1]).name) is not None
        # exactly the marker the assignment would merge: no event time, written at 0 ms
        # (compaction's closed-day rule waits for garmexport's own first marker)
        written = Marker.from_json((tmp_path / t.written[1]).read_bytes())
        assert written == takeover_marker(t.partition, jvm_before[t.partition])
        assert written.written_at_ms == 0 and written.low_event_ms is None
        assert (tmp_path / pdir / TAKEOVER_FILE).exists()
    counting = CountingStorage(str(tmp_path))
    for p in (0, 1):
        rec = read_partition_state(counting, "local", "garmadon", p,
                                   JvmScan(counting, exported_origins()))
        assert rec.markers and rec.jvm == {} and rec.takeover is not None
        assert rec.state.seek() == before[p].seek()
        assert {o: rec.state.low_of(o) for o in exported_origins()} == \
            {o: before[p].low_of(o) for o in exported_origins()}
        assert "flink_kafka_consumer" not in rec.state.low  # a type it never wrote: from the seek
    assert counting.tails == 0  # the assignment reads markers, no JVM footer
    assert uncovered(storage, "local", "garmadon", [0, 1, 2]) == [2]
    again = take_over(storage, "local", "garmadon", [0, 1], JvmScan(storage, exported_origins()))
    assert [t.outcome for t in again] == ["has markers", "has markers"]


def test_a_dry_run_writes_nothing_and_a_partition_with_markers_is_left_alone(
        tmp_path: Path, records) -> None:
    build(tmp_path, records, rows_per_file=200)
    storage = LocalStorage(str(tmp_path), "t")
    pdir = partition_dir("local", "garmadon", 1)
    storage.put_exclusive(f"{pdir}/{MarkerName('i1', 1).format()}",
                          Marker(1, {"fs": 5}, {}, processed=5, written_at_ms=1).to_json())
    done = take_over(storage, "local", "garmadon", [0, 1], JvmScan(storage, exported_origins()),
                     dry_run=True)
    assert [(t.outcome, t.written) for t in done] == [("dry run", ()), ("has markers", ())]
    assert not (tmp_path / partition_dir("local", "garmadon", 0)).exists()
    assert sorted(e.name for e in storage.list(pdir)) == [MarkerName("i1", 1).format()]


def test_run_takes_over_before_joining_only_where_no_marker_is(tmp_path: Path, records) -> None:
    build(tmp_path, records, rows_per_file=200)
    config = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(tmp_path),
                                "GARMEXPORT_SOURCE_TOPIC": "garmadon"})
    off = dataclasses.replace(config, jvm=dataclasses.replace(config.jvm, takeover=False))
    assert before_joining(off, [0, 1, 2]) == []
    assert not (tmp_path / "_offsets").exists()
    done = before_joining(config, [0, 1, 2])
    assert [t.outcome for t in done] == ["written", "written", "written"]
    assert before_joining(config, [0, 1, 2]) == []  # every partition has its marker now
