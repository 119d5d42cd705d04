"""verify names the files: those holding each duplicate, those bordering each gap."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from garmexport.storage.open import open_storage
from garmexport.tools.verify import compare, read_output
from garmexport.tools.verify_findings import DuplicateGroup, Gap

DAY = "day=2026-11-01"


def write(root: Path, dataset: str, name: str, partition: int, offsets: range) -> str:
    path = root / dataset / DAY / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"kafka_partition": [partition] * len(offsets),
                             "kafka_offset": list(offsets)}), path)
    return f"{dataset}/{DAY}/{name}"


def test_duplicates_name_the_files_holding_them_and_gaps_the_files_around_them(tmp_path):
    a = write(tmp_path, "fs", "a.parquet", 0, range(0, 100))
    b = write(tmp_path, "fs", "b.parquet", 0, range(50, 150))     # 50..99 twice
    d = write(tmp_path, "fs", "d.parquet", 0, range(200, 250))     # fs 150..199 lost
    e = write(tmp_path, "jvm", "e.parquet", 0, range(250, 300))   # jvm 300..309 lost at the end
    f = write(tmp_path, "jvm", "f.parquet", 1, range(0, 10))
    write(tmp_path, "jvm", "g.parquet", 1, range(5, 6))            # one offset, twice
    calls = []
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic",
                              lambda *a: calls.append(a))
    assert files == 6 and [c[:2] for c in calls] == [(n, 6) for n in range(1, 7)]
    assert calls[-1][2] == 100 + 100 + 50 + 50 + 10 + 1
    expected = {0: {**{o: "fs" for o in range(250)}, **{o: "jvm" for o in range(250, 310)}},
                1: {o: "jvm" for o in range(10)}}
    report = compare(held, files, expected)
    p0, p1 = report.partitions[0], report.partitions[1]
    assert p0.duplicate_files == [DuplicateGroup((a, b), 50, 99, 50)]
    assert p0.gaps == [Gap("fs", 150, 199, 50, b, d), Gap("jvm", 300, 309, 10, e, None)]
    assert p1.duplicate_files == [DuplicateGroup((f, f"jvm/{DAY}/g.parquet"), 5, 5, 1)]
    assert p1.gaps == []
    doc = report.to_dict()["partitions"]["0"]
    assert doc["duplicate_files"] == [{"files": [a, b], "first": 50, "last": 99, "count": 50}]
    assert doc["gaps"][0] == {"dataset": "fs", "first": 150, "last": 199, "count": 50,
                              "before": b, "after": d}
    assert doc["gap_count"] == 2 and doc["duplicate_groups"] == 1


def test_interleaved_losses_of_two_datasets_are_one_gap_each(tmp_path):
    write(tmp_path, "fs", "a.parquet", 0, range(0, 10, 2))
    write(tmp_path, "jvm", "b.parquet", 0, range(1, 10, 2))
    write(tmp_path, "fs", "c.parquet", 0, range(30, 40, 2))
    write(tmp_path, "jvm", "d.parquet", 0, range(31, 40, 2))
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")
    expected = {0: {o: ("fs" if o % 2 == 0 else "jvm") for o in range(40)}}
    gaps = compare(held, files, expected).partitions[0].gaps
    assert [(g.dataset, g.first, g.last, g.count, g.before, g.after) for g in gaps] == [
        ("fs", 10, 28, 10, f"fs/{DAY}/a.parquet", f"fs/{DAY}/c.parquet"),
        ("jvm", 11, 29, 10, f"jvm/{DAY}/b.parquet", f"jvm/{DAY}/d.parquet")]
