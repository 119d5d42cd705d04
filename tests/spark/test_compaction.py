"""Compaction with real PySpark and a Hive metastore: rows, file counts, crashes, schemas."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from garmexport.compaction import complete, hadoop_conf
from garmexport.errors import ConfigError
from garmexport.storage.base import ROOT_DIRECTORY, ROOT_MISSING, ROOT_NOT_DIRECTORY
from garmexport.compaction.fs import HadoopFs, LocalFs
from garmexport.compaction.job import CompactOptions, Summary, run
from garmexport.compaction.names import CompactedName
from garmexport.compaction.recover import wall_ms
from garmexport.compaction.scan import ranges_from_json
from garmexport.compaction.swap import STEPS
from garmexport.process.crash_hooks import CRASH_ENV
from garmexport.hive.tables import TableNaming
from garmexport.protocol.naming import MS_PER_DAY, day_number
from tests.spark.exporter_like import (data_files, markers_for, read_rows, write_day,
                                       write_raw)

pytestmark = pytest.mark.spark

DAY = "2026-11-01"
CLOSED_MS = (day_number(DAY) + 1) * MS_PER_DAY + 2 * 3600_000  # 2 h past the day's end
NOW_MS = CLOSED_MS + 1000
REPO = Path(__file__).resolve().parents[2]


def options(root: str, database: str, target: int, **kw: Any) -> CompactOptions:
    # no grace: each swap ends within its run (test_swap_grace.py runs the grace)
    kw.setdefault("grace_s", 0.0)
    return CompactOptions(root_uri=LocalFs(root).uri, lateness_s=3600.0,
                          target_file_bytes=target,
                          sort_columns=("kafka_partition", "kafka_offset"), codec="zstd",
                          tables=TableNaming(database), **kw)


def hive_count(spark: Any, database: str, output: str, where: str = "") -> int:
    spark.catalog.refreshTable(f"{database}.{output}")
    cond = f"day = '{DAY}'" + (f" AND {where}" if where else "")
    return int(spark.sql(f"SELECT count(*) FROM {database}.{output} WHERE {cond}")
               .collect()[0][0])


def day_bytes(root: str, output: str) -> int:
    d = os.path.join(root, output, f"day={DAY}")
    return sum(os.path.getsize(os.path.join(d, n)) for n in data_files(root, output, DAY))


class Crash(Exception):
    pass


def test_a_thousand_small_files_become_target_sized_files_with_the_same_rows(
        spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "out")
    rows = write_day(root, "fs", DAY, partitions=4, files_per_partition=250, rows_per_file=4)
    late = [write_raw(root, "fs", DAY, p, [10_000, 10_002]) for p in range(4)]  # above W
    rows += [(p, o) for p in range(4) for o in (10_000, 10_002)]
    markers_for(root, {p: {"fs": 5000} for p in range(4)}, CLOSED_MS)
    target = day_bytes(root, "fs") // 4
    fs = LocalFs(root)

    not_yet = run(spark, fs, options(root, "big", target), now_ms=day_number(DAY) * MS_PER_DAY)
    assert not_yet.files_in == 0  # the day is not closed yet: only the table is made
    assert hive_count(spark, "big", "fs") == len(rows)

    summary = run(spark, fs, options(root, "big", target), NOW_MS)
    assert summary.files_in == 1000 and summary.problems == []
    # the window in which a reader can see an output and some of its inputs, measured
    print(f"swap window for 1000 files into {summary.files_out}: {summary.max_swap_s:.3f} s")
    assert 0 < summary.max_swap_s < 10, summary.max_swap_s
    files = data_files(root, "fs", DAY)
    compacted = [n for n in files if CompactedName.parse(n)]
    assert 4 <= len(compacted) == summary.files_out <= 5
    assert sorted(set(files) - set(compacted)) == sorted(late)  # above W: left alone
    assert read_rows(root, "fs", DAY) == sorted(rows)
    assert hive_count(spark, "big", "fs") == len(rows)
    first = pq.read_table(os.path.join(root, "fs", f"day={DAY}", compacted[0]))
    keys = list(zip(first["kafka_partition"].to_pylist(), first["kafka_offset"].to_pylist()))
    assert keys == sorted(keys)  # sorted within the file by the configured columns
    ranges = [r for n in compacted for r in ranges_from_json(
        fs.read(f"fs/day={DAY}/{CompactedName.parse(n).sidecar()}"))]  # type: ignore[union-attr]
    assert sum(r.rows for r in ranges) == 4000 and len(ranges) == 1000
    assert complete.read_complete(fs, "fs", DAY) is None  # late raw files remain

    assert run(spark, fs, options(root, "big", target), NOW_MS).files_in == 0  # idempotent

    markers_for(root, {p: {"fs": 20_000} for p in range(4)}, CLOSED_MS, counter=2)
    again = run(spark, fs, options(root, "big", target), NOW_MS)
    assert again.files_in >= 5  # the 4 late files and the undersized compacted remainder
    assert all(CompactedName.parse(n) for n in data_files(root, "fs", DAY))
    assert read_rows(root, "fs", DAY) == sorted(rows)
    assert hive_count(spark, "big", "fs") == len(rows)
    doc = complete.read_complete(fs, "fs", DAY)
    assert doc is not None and doc["rows"] == len(rows)
    assert complete.is_current(doc, os.listdir(os.path.join(root, "fs", f"day={DAY}")))


#: the target size for ``small_day``: about ten of its 3 KB files per output, so that a
#: day compacts into three outputs (a swap with several moves and deletes, as the kill
#: points need) instead of thirty one-file outputs, each a Spark job of its own (half of a
#: compaction run's time when this was 2,000)
SMALL_TARGET = 32_000


def small_day(root: str) -> list[tuple[int, int]]:
    rows = write_day(root, "gc", DAY, partitions=2, files_per_partition=15, rows_per_file=3)
    markers_for(root, {p: {"gc": 10_000} for p in range(2)}, CLOSED_MS)
    return rows


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_of_the_swap_is_repaired_by_the_next_run(
        spark: Any, tmp_path: Path, step: str) -> None:
    root = str(tmp_path / "out")
    rows = small_day(root)
    database = "crash_" + step.replace("-", "_")

    def crash(at: str) -> None:
        if at == step:
            raise Crash(at)

    # "waiting" is only reached by a run that waits: there the clock stands still, so the
    # swap is in its grace at the first sweep however slow the machine (a 1 s grace on the
    # wall clock ran out before it under load, and the run finished the swap instead)
    with pytest.raises(Crash):
        run(spark, LocalFs(root), options(root, database, SMALL_TARGET, grace_s=float(
            step == "waiting"), sweep_every_s=0.2), NOW_MS, crash,
            clock=(lambda: NOW_MS) if step == "waiting" else wall_ms)
    summary = run(spark, LocalFs(root), options(root, database, SMALL_TARGET), NOW_MS)
    assert read_rows(root, "gc", DAY) == sorted(rows)
    assert all(CompactedName.parse(n) for n in data_files(root, "gc", DAY))
    assert not os.listdir(os.path.join(root, "_compaction", "gc", f"day={DAY}"))
    assert hive_count(spark, database, "gc") == len(rows)
    if step in ("before-journal",):
        assert summary.rolled_back == 1 and summary.files_in == 30
    else:
        assert summary.rolled_forward == 1 and summary.files_in == 0


def run_process(root: str, workdir: str, env: dict[str, str],
                kill_after: str | None = None, delay_s: float = 0.0) -> int:
    """Run a compaction process; SIGKILL it ``delay_s`` after it prints ``kill_after``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.run_compaction", root, workdir, str(NOW_MS),
         str(SMALL_TARGET)], cwd=REPO, env={**os.environ, **env}, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if kill_after is not None and line.strip() == kill_after:
            time.sleep(delay_s)
            proc.send_signal(signal.SIGKILL)  # the process runs on meanwhile: a real race
            break
    proc.stdout.close()
    return proc.wait(timeout=300)


@pytest.mark.parametrize("how", ["crash-hook", "sigkill"])
def test_a_killed_compaction_process_leaves_the_day_exact_after_the_next_run(
        spark: Any, tmp_path: Path, how: str) -> None:
    root = str(tmp_path / "out")
    rows = small_day(root)
    workdir = str(tmp_path / "spark-child")
    if how == "crash-hook":
        code = run_process(root, workdir, {CRASH_ENV: "mid-delete"})
    else:
        # A random point: somewhere in the Spark write (the run takes several seconds
        # after "starting"), or just after a swap step while the process races on.
        after = random.choice(["starting", *STEPS[:5]])
        code = run_process(root, workdir, {}, kill_after=after,
                           delay_s=random.uniform(0, 2.0) if after == "starting" else 0.0)
    assert code in (137, -signal.SIGKILL)
    run(spark, LocalFs(root), options(root, "killed_" + how.replace("-", "_"), SMALL_TARGET), NOW_MS)
    assert read_rows(root, "gc", DAY) == sorted(rows)
    assert all(CompactedName.parse(n) for n in data_files(root, "gc", DAY))
    assert hive_count(spark, "killed_" + how.replace("-", "_"), "gc") == len(rows)


def test_a_field_added_to_the_proto_becomes_a_column_and_old_days_read_null(
        spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "out")
    old_day, day = "2026-10-31", DAY
    old = write_day(root, "container", old_day, 1, 5, 3)
    rows = write_day(root, "container", day, 1, 5, 3)
    markers_for(root, {0: {"container": 1000}}, CLOSED_MS)
    fs = LocalFs(root)
    run(spark, fs, options(root, "evolve", 10**6), NOW_MS)
    assert "job_tag" not in spark.table("evolve.container").columns
    new = [(0, o) for o in range(500, 510, 2)]
    write_raw(root, "container", day, 0, [o for _, o in new], extra="job_tag")
    markers_for(root, {0: {"container": 1000}}, CLOSED_MS, counter=2)
    run(spark, fs, options(root, "evolve", 10**6), NOW_MS)

    assert "job_tag" in spark.table("evolve.container").columns
    spark.catalog.refreshTable("evolve.container")
    by_day = {(r[0], r[1]): r[2] for r in spark.sql(
        "SELECT day, job_tag IS NULL, count(*) FROM evolve.container GROUP BY 1, 2").collect()}
    assert by_day == {(old_day, True): len(old), (day, True): len(rows), (day, False): len(new)}
    table = pq.read_table(os.path.join(root, "container", f"day={day}"), partitioning=None)
    tags = {(p, o): t for p, o, t in zip(table["kafka_partition"].to_pylist(),
                                         table["kafka_offset"].to_pylist(),
                                         table["job_tag"].to_pylist())}
    assert tags[new[0]] == f"job_tag-{new[0][1]}" and tags[rows[0]] is None


def test_files_published_into_the_day_during_compaction_are_left_alone(
        spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "out")
    rows = small_day(root)
    published: list[str] = []

    def exporter_publishes(step: str) -> None:
        if step == "before-journal":  # Spark has written; the swap has not started
            published.append(write_raw(root, "gc", DAY, 1, [20_000, 20_002]))

    summary: Summary = run(spark, LocalFs(root), options(root, "during", SMALL_TARGET), NOW_MS,
                           exporter_publishes)
    assert summary.files_in == 30
    assert published[0] in data_files(root, "gc", DAY)
    assert read_rows(root, "gc", DAY) == sorted(rows + [(1, 20_000), (1, 20_002)])
    assert hive_count(spark, "during", "gc") == len(rows) + 2


def test_both_file_systems_look_at_a_root_without_making_it(spark: Any, tmp_path: Path) -> None:
    """What ``garmexport compact`` checks before it compacts (cli/compact.py)."""
    (tmp_path / "a-file").write_text("x")
    for make in (LocalFs, lambda root: HadoopFs(spark, LocalFs(root).uri)):
        assert make(str(tmp_path)).root_state() == ROOT_DIRECTORY
        assert make(str(tmp_path / "a-file")).root_state() == ROOT_NOT_DIRECTORY
        assert make(str(tmp_path / "typo")).root_state() == ROOT_MISSING
        assert not (tmp_path / "typo").exists()


def test_a_root_spark_has_no_file_system_for_is_named_with_what_to_add(spark: Any) -> None:
    """pip's pyspark has Hadoop's HDFS client and no S3A: ``compact`` says so before its
    first file call (cli/compact.py), and sets the bucket's S3A settings in the running
    session, leaving those the user gave with --spark-conf."""
    setting = "output.root (GARMEXPORT_OUTPUT_ROOT)"
    with pytest.raises(ConfigError, match=r"Spark's root 's3a://b/out' \(from output\.root "
                       r".*no s3a:// file system .*S3AFileSystem.*hadoop-aws:3\.5\.0"):
        hadoop_conf.check_scheme(spark, "s3a://b/out", setting)
    hadoop_conf.check_scheme(spark, "hdfs://127.0.0.1:1/out", setting)
    hadoop_conf.check_scheme(spark, "file:///out", setting)
    settings = {"fs.s3a.bucket.b.endpoint": "http://127.0.0.1:1",
                "fs.s3a.bucket.b.endpoint.region": "eu-west-3"}
    given = {"spark.hadoop.fs.s3a.bucket.b.endpoint.region": "us-west-2"}
    assert hadoop_conf.apply(spark, settings, given) == ["fs.s3a.bucket.b.endpoint"]
    conf = spark._jsc.hadoopConfiguration()
    assert conf.get("fs.s3a.bucket.b.endpoint") == "http://127.0.0.1:1"
    assert conf.get("fs.s3a.bucket.b.endpoint.region") is None  # left to --spark-conf


def test_hadoop_file_operations_work_through_the_spark_jvm(spark: Any, tmp_path: Path) -> None:
    fs = HadoopFs(spark, LocalFs(str(tmp_path)).uri)
    fs.write("a/b.json", b'{"x": 1}')
    fs.write("a/b.json", b'{"x": 2}')  # replaces
    assert fs.read("a/b.json") == b'{"x": 2}'
    assert fs.read_tail("a/b.json", 2) == (b"2}", 8)
    fs.rename("a/b.json", "a/c.json")
    with pytest.raises(OSError):
        fs.write("a/d", b"d") or fs.rename("a/d", "a/c.json")
    assert sorted(e.name for e in fs.list("a") if not e.name.startswith(".")) == [
        "c.json", "d"]
    for read in (fs.read, lambda p: fs.read_tail(p, 2)):  # as LocalFs and every store
        with pytest.raises(FileNotFoundError):  # (complete.read_complete relies on it)
            read("a/missing")
    fs.delete("a/c.json")
    fs.delete("a/missing")
    fs.delete_tree("a")
    assert fs.list("a") == []
