"""The shipped Mesos definitions, run as they are: the Marathon app's and the Metronome job's
``cmd`` with their ``env``, as real processes, with the cluster endpoints pointed at local
stand-ins. ``mesos/README.md`` ("How the shipped definitions are tested") lists exactly
what is replaced; everything else is read from ``mesos/*.json`` at run time.

One test, in the order of production: the app exports a real topic into a WebHDFS root
and answers its health checks, a SIGTERM stops it cleanly, the nightly job compacts what it
wrote and registers the Hive partitions in a real (standalone) metastore, and
``garmexport verify`` still finds every event exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from garmexport.compaction.names import CompactedName
from garmexport.kafka.topics import create_topic
from garmexport.testbed.embedded_broker import free_port
from garmexport.pipeline.recovery import read_partition_state
from garmexport.storage.open import open_storage
from tests.broker import Broker
from tests.integration.harness import assert_exact, produce, topic_ends
from tests.spark.metastore import Metastore, start_metastore
from tests.webhdfs_server import WebHdfsServer

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
MESOS = REPO / "mesos"
RECORDS = 8_000
HDFS_PATH = "/data/garmadon"  # the path of the shipped webhdfs:// root, kept


def definition(name: str) -> dict:
    return json.loads((MESOS / name).read_text())


@pytest.fixture
def metastore(tmp_path: Path) -> Iterator[Metastore]:
    server = start_metastore(tmp_path / "metastore")
    try:
        yield server
    finally:
        server.stop()


def make_sandbox(tmp_path: Path) -> Path:
    """A Mesos sandbox: the fetched artifact (``config/garmexport.toml`` stands in for the
    file served at the artifact URL) and, on PATH, a ``garmexport`` command running this
    checkout (stands in for the image's installed command)."""
    sandbox = tmp_path / "sandbox"
    (sandbox / "bin").mkdir(parents=True)
    shutil.copy(REPO / "config" / "garmexport.toml", sandbox / "garmexport.toml")
    shim = sandbox / "bin" / "garmexport"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m garmexport "$@"\n')
    shim.chmod(0o755)
    return sandbox


def task_env(shipped: Mapping[str, str], sandbox: Path, **replaced: str) -> dict[str, str]:
    """What a Mesos task sees: a bare process environment, ``MESOS_SANDBOX``, the shipped
    ``env`` and the test's replacements (which must replace shipped keys or name
    endpoints, never add tuning)."""
    base = {k: os.environ[k] for k in ("HOME", "LANG", "JAVA_HOME") if k in os.environ}
    base["PATH"] = f"{sandbox / 'bin'}{os.pathsep}{os.environ['PATH']}"
    base["PYTHONPATH"] = str(REPO)
    return {**base, "MESOS_SANDBOX": str(sandbox), **shipped, **replaced}


def launch(cmd: str, env: Mapping[str, str], cwd: Path, out: Path, err: Path
           ) -> subprocess.Popen:
    """``cmd`` as Mesos runs it: ``/bin/sh -c``, in the sandbox."""
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        return subprocess.Popen(["/bin/sh", "-c", cmd], env=dict(env), cwd=cwd,
                                stdout=stdout, stderr=stderr)


def wait_committed(root: str, cluster: str, topic: str, ends: Mapping[int, int],
                   process: subprocess.Popen, log: Path, timeout_s: float) -> None:
    """Until the markers of every partition reach the topic's end (the exporter caught up)."""
    storage = open_storage(root, "test-probe")
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            seeks = {p: read_partition_state(storage, cluster, topic, p).state.seek()
                     for p in ends}
            if all(seeks[p] is not None and seeks[p] >= end for p, end in ends.items()):
                return
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"not caught up (exit {process.poll()}): {seeks} of "
                                     f"{dict(ends)}\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(1.0)
    finally:
        storage.close()


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def wait_status(url: str, process: subprocess.Popen, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while http_status(url) != 200:
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{url} not 200 (exit {process.poll()}):\n"
                                 f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)


def is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def json_lines(*paths: Path) -> list[dict]:
    return [json.loads(line) for p in paths for line in p.read_text().splitlines()
            if line.startswith("{")]


def test_the_shipped_app_and_nightly_job_run_as_defined_against_local_stand_ins(
        own_broker: Broker, webhdfs: WebHdfsServer, metastore: Metastore,
        tmp_path: Path) -> None:
    app, job = definition("garmexport.json"), definition("compaction.json")
    sandbox = make_sandbox(tmp_path)
    topic = app["env"]["GARMEXPORT_SOURCE_TOPIC"]
    create_topic(own_broker.bootstrap, topic, 4)
    produce(own_broker.bootstrap, topic, RECORDS, days=3, late_share=0.02)
    ends = topic_ends(own_broker.bootstrap, topic)
    root = f"webhdfs://127.0.0.1:{webhdfs.server_address[1]}{HDFS_PATH}"
    assert app["env"]["GARMEXPORT_OUTPUT_ROOT"].endswith(HDFS_PATH)

    # The Marathon app: Marathon gives PORT0; Kafka and the NameNode are local stand-ins.
    port = free_port()
    env = task_env(app["env"], sandbox, PORT0=str(port),
                   GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS=own_broker.bootstrap,
                   GARMEXPORT_OUTPUT_ROOT=root)
    out, err = tmp_path / "app.out", tmp_path / "app.err"
    exporter = launch(app["cmd"], env, sandbox, out, err)
    try:
        [live], [ready] = app["healthChecks"], app["readinessChecks"]
        wait_status(f"http://127.0.0.1:{port}{live['path']}", exporter, err, 120)
        wait_status(f"http://127.0.0.1:{port}{ready['path']}", exporter, err, 120)
        wait_committed(webhdfs.local(HDFS_PATH), app["env"]["GARMEXPORT_SOURCE_CLUSTER"],
                       topic, ends, exporter, err, 300)
        assert http_status(f"http://127.0.0.1:{port}{live['path']}") == 200
        exporter.send_signal(signal.SIGTERM)  # what Marathon sends to stop the task
        assert exporter.wait(timeout=app["taskKillGracePeriodSeconds"]) == 0, \
            err.read_text()[-3000:]
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()

    # The Metronome job: the WebHDFS stand-in has no HDFS RPC (hdfs://), which Spark's
    # Hadoop client needs (pip's pyspark fails on webhdfs://), so the documented key points
    # it at the same files on the stand-in's local disk; the metastore is a real one on
    # loopback. tests/hdfs/test_hdfs_compaction.py runs this job on a real cluster.
    env = task_env(job["run"]["env"], sandbox, SPARK_LOCAL_IP="127.0.0.1",
                   GARMEXPORT_COMPACTION_HADOOP_ROOT="file://" + webhdfs.local(HDFS_PATH),
                   GARMEXPORT_HIVE_METASTORE_URI=metastore.uri,
                   # the one tuning added: the job waits its grace out, not an hour
                   GARMEXPORT_COMPACTION_RETIRED_GRACE_S="3")
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    compaction = launch(job["run"]["cmd"], env, sandbox, out, err)
    try:
        code = compaction.wait(timeout=900)
    finally:
        if compaction.poll() is None:
            compaction.kill()
            compaction.wait()
    assert code == 0, f"{out.read_text()[-2000:]}\n{err.read_text()[-4000:]}"
    # log.format = "json" (shipped): every line is JSON, the Spark JVM's and py4j's included,
    # and Spark's harmless warnings stay out (compaction.spark_log_level ERROR)
    lines = [line for p in (out, err) for line in p.read_text().splitlines()]
    assert lines and [line for line in lines if not is_json_object(line)] == []
    events = json_lines(out, err)
    assert [e for e in events if e.get("logger", "").startswith("garmexport.compaction.spark_logs")
            and e["level"] not in ("ERROR", "CRITICAL")] == []
    [summary] = [e for e in events if e.get("event") == "compaction_summary"]
    [done] = [e for e in events if e.get("event") == "compaction_done"]
    assert done["days_compacted"] >= 1 and done["problems"] == 0, done
    synced = [e for e in events if e.get("event") == "hive_table_synced"]
    assert synced and all(e["partitions_added"] >= 1 for e in synced), synced
    local = Path(webhdfs.local(HDFS_PATH))
    compacted = [p for p in local.rglob("*.parquet") if CompactedName.parse(p.name)]
    assert len(compacted) >= done["files_out"] >= 1
    assert summary["days_compacted"] == done["days_compacted"]

    # Nothing lost or doubled by the night's work, read back through the app's own root.
    verify_env = task_env(app["env"], sandbox, GARMEXPORT_OUTPUT_ROOT=root,
                          GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS=own_broker.bootstrap)
    assert_exact(verify_env, ends)
