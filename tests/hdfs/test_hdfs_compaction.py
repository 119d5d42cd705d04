"""Compaction where the data is: Spark on a real HDFS through ``hdfs://``, and on S3 through
``s3a://``, with Hive tables over them in a real metastore.

The days are exporter-like files (tests/spark/exporter_like.py) published into the root
through the exporter's own backend (WebHDFS as the root's owner ``garm``; botocore on
SeaweedFS), markers included. Spark reads and writes the same files through Hadoop's client:
``hdfs://127.0.0.1:<RPC port>/...`` (pip's pyspark has the HDFS client; the session's
cluster has a free RPC port, so ``compaction.hadoop_root`` names it, as README says to; the
shipped job's test runs on a cluster of its own whose NameNode listens on the default RPC
port 8020, with the root derived from ``output.root`` as shipped) and ``s3a://`` (hadoop-aws and the AWS SDK,
fetched once with Maven: tests/s3a_jars.py). What every test checks is the promise: the
rows of the day, per (partition, offset), are exactly those before, read back through the
exporter's backend; the Hive partition is on the store's URI and Spark SQL counts the day
right through the metastore.

One Spark session (the HDFS user ``garm`` and the S3A settings come from
garmexport/compaction/hadoop_conf.py, as ``garmexport compact`` sets them) and one
standalone metastore (with S3A on its class path: a metastore looks at the locations it is
given) serve the module; every test uses the session, ``spark``, so tests/conftest.py puts
them in its xdist group, on one worker, and both start once.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from garmexport.compaction import complete, hadoop_conf
from garmexport.compaction.before_spark import finish_swaps
from garmexport.compaction.fs import HadoopFs
from garmexport.compaction.job import CompactOptions, run
from garmexport.compaction.names import CompactedName, view_path
from garmexport.compaction.recover import wall_ms
from garmexport.compaction.spark_job import build_session
from garmexport.process.crash_hooks import CRASH_ENV
from garmexport.hive.metastore import Metastore
from garmexport.hive.tables import TableNaming, columns_of, partition_location, table_location
from garmexport.settings.config import OutputConfig
from garmexport.storage.base import Storage
from garmexport.storage.hadoop_uri import spark_root
from garmexport.storage.open import open_storage
from garmexport.storage.options import StorageOptions, from_output
from garmexport.testbed.hive_local import JavaService, start_metastore
from tests.hdfs.conftest import USER, HdfsRoot
from tests.conftest import hdfs_for_fixture
from tests.hdfs_cluster import HdfsUnavailable, MiniHdfs
from tests.s3a_jars import s3a_jars
from tests.seaweed import Seaweed
from tests.spark.conftest import local_spark_conf
from tests.spark.exporter_like import markers_for, tree, write_day
from tests.spark.test_compaction import CLOSED_MS, DAY, NOW_MS, SMALL_TARGET
from tests.spark.test_recovery_time import end, kill_when_stopped, log_events
from tests.spark.test_shipped_jobs import HDFS_PATH, definition, make_sandbox, task_env

pytestmark = pytest.mark.spark

OUTPUT = "gc"
if not os.environ.get("GARMEXPORT_REQUIRE_HDFS"):
    pytest.skip("compaction on a real HDFS and through s3a:// runs in `tox -e hdfs` (Maven "
                "fetches Hadoop's jars; GARMEXPORT_REQUIRE_HDFS unset)", allow_module_level=True)


class Crash(Exception):
    pass


def hdfs_options() -> StorageOptions:
    return from_output(OutputConfig(hdfs_user=USER))


def s3_options(seaweed: Seaweed) -> StorageOptions:
    return from_output(OutputConfig(s3_endpoint_url=seaweed.endpoint,
                                    s3_access_key_id=seaweed.access_key,
                                    s3_secret_access_key=seaweed.secret_key))


def s3_root(seaweed: Seaweed) -> str:
    return f"s3://{seaweed.bucket}/compaction-{uuid.uuid4().hex[:12]}/out"


#: Hadoop's default NameNode RPC port: a root derived from ``webhdfs://host:port/p`` names it
DEFAULT_RPC_PORT = 8020


@pytest.fixture(scope="module")
def default_port_hdfs() -> Iterator[MiniHdfs]:
    """A cluster of this module's own whose NameNode listens on 8020 (one per machine can:
    the session clusters of the other workers take free ports)."""
    yield from hdfs_for_fixture(rpc_port=DEFAULT_RPC_PORT)


@pytest.fixture(scope="module")
def jars() -> list[Path]:
    try:
        return s3a_jars()
    except HdfsUnavailable as exc:
        pytest.fail(f"hadoop-aws and the AWS SDK cannot be fetched here: {exc}")


@pytest.fixture(scope="module")
def hive(jars: list[Path], seaweed: Seaweed,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaService]:
    """A standalone metastore that reaches hdfs:// (pyspark's jars) and the test bucket
    through s3a:// (its jars, and the bucket's settings as compaction derives them)."""
    site = hadoop_conf.hadoop_settings(spark_root(s3_root(seaweed)), s3_options(seaweed))
    service = start_metastore(tmp_path_factory.mktemp("metastore"),
                              classpath=[str(j) for j in jars], site=site)
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="module")
def spark(jars: list[Path], hive: JavaService, seaweed: Seaweed,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The module's Spark session on ``hive``: S3A on its class path; the HDFS user and the
    bucket's S3A settings from hadoop_conf, as ``garmexport compact`` sets them."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = {**local_spark_conf(str(tmp_path_factory.mktemp("spark"))),
            "spark.jars": ",".join(str(j) for j in jars)}
    # the user is the JVM's: one for the session, the one every HDFS root here is owned by
    conf = hadoop_conf.with_java_options(conf, hadoop_conf.java_options(
        "hdfs://127.0.0.1/", hdfs_options()))
    session = build_session("local[2]", f"thrift://127.0.0.1:{hive.port}", conf)
    hadoop_conf.apply(session, hadoop_conf.hadoop_settings(spark_root(s3_root(seaweed)),
                                                           s3_options(seaweed)), {})
    yield session
    session.stop()


def options(root_uri: str, database: str, **kw: Any) -> CompactOptions:
    kw.setdefault("grace_s", 0.0)
    return CompactOptions(root_uri=root_uri, lateness_s=3600.0, target_file_bytes=SMALL_TARGET,
                          sort_columns=("kafka_partition", "kafka_offset"), codec="zstd",
                          tables=TableNaming(database), sweep_every_s=0.2, **kw)


def publish_day(store: Storage, days: tuple[str, ...] = (DAY,)) -> list[tuple[str, int, int]]:
    """Exporter-like raw files of ``days`` and the markers that close them, published
    through the exporter's backend; every (day, partition, offset) written."""
    local = tempfile.mkdtemp(prefix="garm-day-")
    try:
        rows = [(day, p, o) for day in days
                for p, o in write_day(local, OUTPUT, day, partitions=2, files_per_partition=15,
                                      rows_per_file=3)]
        markers_for(local, {p: {OUTPUT: 10_000} for p in range(2)}, CLOSED_MS)
        for rel, digest in sorted(tree(local).items()):
            if digest != "dir":
                store.put_exclusive(rel, Path(local, rel).read_bytes())
    finally:
        shutil.rmtree(local)
    return rows


def day_files(store: Storage, day: str = DAY) -> list[str]:
    return sorted(e.name for e in store.list(f"{OUTPUT}/day={day}")
                  if not e.is_dir and e.name.endswith(".parquet") and e.name[0] not in "_.")


def rows_of(store: Storage, day: str = DAY) -> list[tuple[str, int, int]]:
    """Every (day, partition, offset) a path reader of the day sees, through the store."""
    found = []
    for name in day_files(store, day):
        t = pq.read_table(io.BytesIO(store.read(f"{OUTPUT}/day={day}/{name}")),
                          columns=["kafka_partition", "kafka_offset"])
        found += [(day, p, o) for p, o in zip(t["kafka_partition"].to_pylist(),
                                              t["kafka_offset"].to_pylist())]
    return sorted(found)


def register(metastore: JavaService, database: str, root_uri: str, store: Storage,
             days: tuple[str, ...] = (DAY,)) -> None:
    """The table and its days, as the exporter registers them while it runs (at the Spark
    root's URI: garmexport/hive/register.py)."""
    first = day_files(store, days[0])[0]
    schema = pq.read_schema(io.BytesIO(store.read(f"{OUTPUT}/day={days[0]}/{first}")))
    ms = Metastore(f"thrift://127.0.0.1:{metastore.port}", 60)
    try:
        ms.ensure_database(database)
        ms.create_table(database, OUTPUT, columns_of([schema]), table_location(root_uri, OUTPUT))
        ms.add_partitions(database, OUTPUT,
                          [(d, partition_location(root_uri, OUTPUT, d)) for d in days])
    finally:
        ms.close()


def location(metastore: JavaService, database: str, day: str = DAY) -> str | None:
    ms = Metastore(f"thrift://127.0.0.1:{metastore.port}", 60)
    try:
        return ms.partition_location(database, OUTPUT, day)
    finally:
        ms.close()


def sql_count(spark: Any, database: str, day: str = DAY) -> tuple[int, int]:
    """(rows, distinct (partition, offset)) of the day through the metastore."""
    spark.catalog.refreshTable(f"{database}.{OUTPUT}")
    row = spark.sql(f"SELECT count(*), count(DISTINCT kafka_partition, kafka_offset) "
                    f"FROM {database}.{OUTPUT} WHERE day = '{day}'").collect()[0]
    return int(row[0]), int(row[1])


def owners_below(cluster: MiniHdfs, path: str) -> dict[str, str]:
    """Every path below ``path`` (relative) -> its owner."""
    url = (f"http://127.0.0.1:{cluster.http_ports[0]}/webhdfs/v1{path}"
           f"?op=LISTSTATUS&user.name={USER}")
    with urllib.request.urlopen(url, timeout=30) as answer:
        doc = json.load(answer)
    found: dict[str, str] = {}
    for s in doc["FileStatuses"]["FileStatus"]:
        name = s["pathSuffix"]
        found[name] = s["owner"]
        if s["type"] == "DIRECTORY":
            below = owners_below(cluster, f"{path}/{name}")
            found.update({f"{name}/{k}": v for k, v in below.items()})
    return found


def crash_at(step: str, nth: int = 1) -> Callable[[str], None]:
    seen = []

    def crash(at: str) -> None:
        if at == step:
            seen.append(at)
            if len(seen) == nth:
                raise Crash(at)
    return crash


def assert_compacted(store: Storage, rows: list[tuple[str, int, int]], day: str = DAY) -> None:
    names = day_files(store, day)
    assert names and all(CompactedName.parse(n) for n in names), names
    assert rows_of(store, day) == sorted(r for r in rows if r[0] == day)


def test_a_day_on_hdfs_is_compacted_by_spark_over_hdfs_and_counted_through_the_metastore(
        spark: Any, hive: JavaService, hdfs_root: HdfsRoot) -> None:
    store = open_storage(hdfs_root.uri, "test", hdfs_options())
    rows = publish_day(store)
    assert rows_of(store) == sorted(rows) and len(day_files(store)) == 30
    register(hive, "hdfs_day", hdfs_root.hdfs_uri, store)
    fs = HadoopFs(spark, hdfs_root.hdfs_uri)

    summary = run(spark, fs, options(fs.uri, "hdfs_day"), NOW_MS)

    assert summary.problems == [] and summary.files_in == 30 and summary.files_out == 3
    assert_compacted(store, rows)
    assert store.list(f"_compaction/{OUTPUT}/day={DAY}") == []  # journal, staging: all gone
    doc = complete.read_complete(fs, OUTPUT, DAY)
    assert doc is not None and doc["rows"] == len(rows)
    # the exporter's user owns what compaction made, as it owns what the exporter made
    made = owners_below(hdfs_root.cluster, hdfs_root.path)
    assert {k: v for k, v in made.items() if v != USER} == {}
    assert any(k.startswith("_compaction") for k in made)
    assert location(hive, "hdfs_day") == f"{hdfs_root.hdfs_uri}/{OUTPUT}/day={DAY}"
    assert sql_count(spark, "hdfs_day") == (len(rows), len(rows))


#: swap steps after the commit point: the recovery does all the work from the journal
#: alone; the partition is on the view (the shipped job's test below kills mid-delete)
KILL_STEPS = ("after-journal", "after-flip")


@pytest.mark.parametrize("step", KILL_STEPS)
def test_a_swap_crashed_on_hdfs_is_finished_through_webhdfs_before_spark_starts(
        spark: Any, hive: JavaService, hdfs_root: HdfsRoot, step: str) -> None:
    """The crashed run is Spark's (hdfs://); the retry's recovery is the one ``compact``
    makes before it starts Spark: WebHDFS as the exporter's user and a thrift flip."""
    store = open_storage(hdfs_root.uri, "test", hdfs_options())
    rows = publish_day(store)
    database = "hdfs_" + step.replace("-", "_")
    register(hive, database, hdfs_root.hdfs_uri, store)
    fs = HadoopFs(spark, hdfs_root.hdfs_uri)
    with pytest.raises(Crash):
        run(spark, fs, options(fs.uri, database), NOW_MS, crash_at(step))
    if step == "after-flip":
        assert location(hive, database) == f"{hdfs_root.hdfs_uri}/{view_path(OUTPUT, DAY, 1)}"
        assert sql_count(spark, database) == (len(rows), len(rows))  # the view: the whole day

    done = finish_swaps(fs.uri, hdfs_root.uri, hdfs_options(), f"thrift://127.0.0.1:{hive.port}",
                        60.0, TableNaming(database), 60.0, wall_ms())
    assert (done.rolled_forward, done.rolled_back) == (1, 0)
    assert_compacted(store, rows)
    assert store.list(f"_compaction/{OUTPUT}/day={DAY}") == []
    assert location(hive, database) == f"{hdfs_root.hdfs_uri}/{OUTPUT}/day={DAY}"
    assert sql_count(spark, database) == (len(rows), len(rows))


def test_a_day_on_s3_is_compacted_through_s3a_and_a_crashed_swap_finished_through_botocore(
        spark: Any, hive: JavaService, seaweed: Seaweed) -> None:
    """Two days: the first compacted by Spark alone (every step through s3a://), the
    second crashed with its partition on the view and finished before Spark, by the
    exporter's S3 backend and a thrift flip."""
    root, earlier = s3_root(seaweed), "2026-10-31"
    store = open_storage(root, "test", s3_options(seaweed))
    days = (earlier, DAY)  # compacted in this order
    rows = publish_day(store, days)
    database = "s3_days"
    uri = spark_root(root)
    assert uri.startswith("s3a://")
    register(hive, database, uri, store, days)
    fs = HadoopFs(spark, uri)
    with pytest.raises(Crash):
        run(spark, fs, options(uri, database), NOW_MS, crash_at("after-flip", nth=2))
    assert_compacted(store, rows, earlier)
    assert fs.list(f"_compaction/{OUTPUT}/day={earlier}") == []  # no staging dir left
    assert location(hive, database, earlier) == f"{uri}/{OUTPUT}/day={earlier}"
    assert location(hive, database, DAY) == f"{uri}/{view_path(OUTPUT, DAY, 1)}"
    assert sql_count(spark, database) == (len(rows) // 2, len(rows) // 2)

    done = finish_swaps(uri, root, s3_options(seaweed), f"thrift://127.0.0.1:{hive.port}",
                        60.0, TableNaming(database), 60.0, wall_ms())

    assert (done.rolled_forward, done.rolled_back) == (1, 0)
    for day in days:
        assert_compacted(store, rows, day)
        assert location(hive, database, day) == f"{uri}/{OUTPUT}/day={day}"
        assert sql_count(spark, database, day) == (len(rows) // 2, len(rows) // 2)
    assert store.list(f"_compaction/{OUTPUT}/day={DAY}") == []
    assert complete.read_complete(fs, OUTPUT, earlier) is not None


def test_the_shipped_nightly_job_compacts_the_real_cluster_and_its_relaunch_finishes_a_kill(
        spark: Any, hive: JavaService, default_port_hdfs: MiniHdfs, tmp_path: Path) -> None:
    """``mesos/compaction.json`` run as Metronome runs it (tests/spark/test_shipped_jobs.py),
    on the real cluster, with nothing added but its ``webhdfs://`` root: its NameNode's RPC
    port is 8020, so Spark's ``hdfs://`` root is derived from ``output.root`` (no
    ``compaction.hadoop_root``). The first launch is SIGKILLed, its Spark JVM with it, while
    it deletes the day's inputs; the relaunch (Metronome's ON_FAILURE) finishes the swap
    before it starts Spark, through WebHDFS as the job's ``hdfs_user`` and a thrift flip,
    then runs."""
    cluster = default_port_hdfs
    assert cluster.namenodes[0]["rpc"] == DEFAULT_RPC_PORT, cluster.namenodes
    job = definition("compaction.json")
    user = job["run"]["env"]["GARMEXPORT_OUTPUT_HDFS_USER"]
    base = f"/t/{uuid.uuid4().hex[:12]}"
    cluster.mkdir(base, user)
    path = base + HDFS_PATH
    root = cluster.webhdfs_uri(path)
    hdfs_uri = f"hdfs://127.0.0.1{path}"  # the derived root: the default port, unnamed
    assert spark_root(root, "") == hdfs_uri
    store = open_storage(root, "test", from_output(OutputConfig(hdfs_user=user)))
    rows = publish_day(store)
    database = "metronome_hdfs"
    register(hive, database, hdfs_uri, store)
    sandbox = make_sandbox(tmp_path)
    env = task_env(job["run"]["env"], sandbox, SPARK_LOCAL_IP="127.0.0.1",
                   GARMEXPORT_OUTPUT_ROOT=root,
                   GARMEXPORT_HIVE_METASTORE_URI=f"thrift://127.0.0.1:{hive.port}",
                   GARMEXPORT_HIVE_DATABASE=database,
                   GARMEXPORT_COMPACTION_LATENESS_S="3600",  # the test's day ended long ago
                   GARMEXPORT_COMPACTION_RETIRED_GRACE_S="0",
                   GARMEXPORT_COMPACTION_SPARK_MASTER="local[1]",
                   # the suite's JVM flags (tests/conftest.py): no garmexport setting
                   SPARK_SUBMIT_OPTS=os.environ.get("SPARK_SUBMIT_OPTS", ""))
    assert "GARMEXPORT_COMPACTION_HADOOP_ROOT" not in env
    log = sandbox / "job.log"

    def launch(extra: dict[str, str]) -> subprocess.Popen:
        with open(log, "ab") as out:  # a task of its own: its group is killed alone
            return subprocess.Popen(["/bin/sh", "-c", job["run"]["cmd"]],
                                    env={**env, **extra}, cwd=sandbox, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    first = launch({CRASH_ENV: "mid-delete:1:stop-exit"})
    retry = None
    try:
        kill_when_stopped(first, log)
        first.wait(timeout=60)
        assert 0 < len(day_files(store)) < 30 + 3  # killed with the day half swapped
        retry = launch({})
        assert retry.wait(timeout=900) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        for process in (first, retry):
            if process is not None:
                end(process)

    events = log_events(log)
    [early] = [e for e in events if e.get("event") == "compaction_recovered_before_spark"]
    assert early["rolled_forward"] == 1, early  # through WebHDFS, as the job's user
    assert_compacted(store, rows)
    assert store.list(f"_compaction/{OUTPUT}/day={DAY}") == []
    made = owners_below(cluster, path)
    assert {k: v for k, v in made.items() if v != user} == {}  # Spark's files too
    assert location(hive, database) == f"{hdfs_uri}/{OUTPUT}/day={DAY}"
    assert sql_count(spark, database) == (len(rows), len(rows))
    verify = subprocess.run([str(sandbox / "bin" / "garmexport"), "verify", "--no-broker",
                             "--config", str(sandbox / "garmexport.toml")], env=env,
                            cwd=sandbox, capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
