"""Exactly once on the non-local backends: WebHDFS and S3, configured from outside only.

For each backend, generated records (4 partitions, several days, late events, bad records)
are produced as a stream of 2000 records/s; the exporter runs as a subprocess whose output root and credentials
come only from its environment or a TOML file (``GARMEXPORT_OUTPUT_*``, or the usual
``AWS_*`` variables), is SIGKILLed at seeded random moments and restarted, then left to
catch up and stopped with SIGTERM (exit 0). ``garmexport verify`` with the same
environment must find every record exactly once, and no exporter log may contain the
secret key.

- WebHDFS runs against the test double ``tests/webhdfs_server.py`` in a thread of this
  process, and (``hdfs``, in ``tox -e hdfs`` only) against a real NameNode and DataNodes
  (Hadoop's MiniDFSCluster, ``tests/hdfs_cluster.py``);
- S3 runs against a real SeaweedFS server (``tests/seaweed.py``), skipped with the reason
  when the ``weed`` binary cannot start. The usual ``AWS_*`` variables instead of
  garmexport's own settings are checked on a short export without kills: what they change
  is where the endpoint and the keys come from, which the stream with kills does not
  exercise again (it ran as a fourth case of the stream, 125 s summed under load).

An ``hdfs://`` root is checked from a TOML file too: it must reach WebHDFS on the hosts of
the URI at ``output.hdfs_http_port``, not at the RPC port the URI carries.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest

from garmexport.settings.config import OutputConfig
from garmexport.pipeline.recovery import read_partition_state
from garmexport.storage.open import open_storage
from garmexport.storage.options import from_output
from tests.integration.harness import (
    PYTHON, ROOT, Exporter, assert_exact, exporter_env, produce, topic_ends,
)
from tests.seaweed import Seaweed
from tests.webhdfs_server import WebHdfsServer

RECORDS = 40_000
RATE = 1_000  # records/s: the stream lasts 40 s, and the kills (each with a group join
# of a few seconds) land while it flows
PARTITIONS = [0, 1, 2, 3]
RANDOM_KILLS = 4
SEED = 20261122
HDFS_USER = "garm"


class Target:
    """Where one run exports to: the exporter's settings and the test's own probe."""

    def __init__(self, root: str, env: dict[str, str], probe: dict[str, object],
                 secret: str | None) -> None:
        self.root, self.env, self.probe, self.secret = root, env, probe, secret

    def configure(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with this target's settings, and no ``AWS_*`` variable but its own."""
        return {**{k: v for k, v in env.items() if not k.startswith("AWS_")}, **self.env}


def _outside_env() -> dict[str, str]:
    """This process's environment without anything that could configure the exporter
    behind the test's back (GARMEXPORT_*, AWS_*)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("GARMEXPORT_", "AWS_"))}


def _target(kind: str, request: pytest.FixtureRequest) -> Target:
    if kind == "hdfs":
        from tests.hdfs.conftest import fresh_root

        root = fresh_root(request.getfixturevalue("real_hdfs"), "out")
        return Target(root.uri, {"GARMEXPORT_OUTPUT_HDFS_USER": HDFS_USER},
                      {"hdfs_user": HDFS_USER}, None)
    if kind == "webhdfs":
        server: WebHdfsServer = request.getfixturevalue("webhdfs")
        root = f"webhdfs://127.0.0.1:{server.server_address[1]}/out"
        return Target(root, {"GARMEXPORT_OUTPUT_HDFS_USER": HDFS_USER},
                      {"hdfs_user": HDFS_USER}, None)
    s3: Seaweed = request.getfixturevalue("seaweed")
    root = f"s3://{s3.bucket}/{kind}-{uuid.uuid4().hex[:8]}"
    probe = {"s3_endpoint_url": s3.endpoint, "s3_access_key_id": s3.access_key,
             "s3_secret_access_key": s3.secret_key}
    if kind == "s3":
        env = {"GARMEXPORT_OUTPUT_S3_ENDPOINT_URL": s3.endpoint,
               "GARMEXPORT_OUTPUT_S3_ACCESS_KEY_ID": s3.access_key,
               "GARMEXPORT_OUTPUT_S3_SECRET_ACCESS_KEY": s3.secret_key}
    else:  # the usual AWS variables instead of garmexport's own settings
        env = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3.access_key,
               "AWS_SECRET_ACCESS_KEY": s3.secret_key}
    return Target(root, env, probe, s3.secret_key)


def _committed(target: Target, topic: str, partitions: list[int]) -> dict[int, int | None]:
    """Per partition, the seek position the markers give (min W + 1), None without one."""
    storage = open_storage(target.root, "e2e-probe", from_output(OutputConfig(**target.probe)))
    try:
        return {p: read_partition_state(storage, "local", topic, p).state.seek()
                for p in partitions}
    finally:
        storage.close()


def _wait_progress(target: Target, topic: str, run: Exporter, beyond: int,
                   timeout_s: float = 60.0) -> None:
    """Wait until the markers commit more than ``beyond`` records in total."""
    deadline = time.monotonic() + timeout_s
    while sum(v or 0 for v in _committed(target, topic, PARTITIONS).values()) <= beyond:
        run.check_alive()
        assert time.monotonic() < deadline, f"{run.name}: no progress in {timeout_s} s"
        time.sleep(0.1)


def _wait_caught_up(target: Target, topic: str, ends: Mapping[int, int], run: Exporter,
                    timeout_s: float) -> float:
    started = time.monotonic()
    while True:
        upto = _committed(target, topic, sorted(ends))
        if all(upto[p] is not None and upto[p] >= end for p, end in ends.items()):
            return time.monotonic() - started
        run.check_alive()
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not caught up in {timeout_s} s: {upto}, ends {dict(ends)}")
        time.sleep(0.5)


@pytest.mark.parametrize("kind", ["webhdfs", "hdfs", "s3"])
def test_exactly_once_across_sigkills_on_a_backend_configured_from_the_environment(
        kind: str, broker, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    target = _target(kind, request)
    topic = broker.new_topic(partitions=4)
    produced: dict = {}
    producer = threading.Thread(target=lambda: produced.update(produce(
        broker.bootstrap, topic, RECORDS, partitions=4, seed=11, days=3, late_share=0.1,
        bad_share=0.005, rate=RATE)), daemon=True)
    env = exporter_env(broker.bootstrap, topic, target.root, WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, KAFKA_SESSION_TIMEOUT_MS=2000,
                       # small polls slow the export down so that the kills hit it at work
                       SOURCE_POLL_MAX_RECORDS=500)
    env = target.configure(env)
    runs: list[Exporter] = []
    producer.start()
    try:
        rng = random.Random(f"{SEED}-{kind}")
        mid_stream, committed = 0, 0
        for i in range(RANDOM_KILLS):
            # the first run logs at DEBUG: the secret must not leak there either
            extra = {"GARMEXPORT_LOG_LEVEL": "DEBUG"} if i == 0 else None
            runs.append(run := Exporter(env, tmp_path, f"{kind}-kill-{i}", extra))
            seeks = run.wait_event("assigned", timeout_s=60)["seeks"]
            # Kill while the run is at work: once its markers commit more than the last
            # run's did (publishes, intents and markers are in flight), after a seeded
            # random delay. Each run thus makes progress, and the kills land mid-stream.
            _wait_progress(target, topic, run, beyond=committed)
            delay = rng.uniform(0.0, 1.5)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.process.wait(timeout=delay)
            assert run.kill() == -9, f"{run.name} exited by itself:\n{run.tail()}"
            upto = _committed(target, topic, PARTITIONS)
            committed = sum(v or 0 for v in upto.values())
            mid_stream += committed < RECORDS
            print(f"{kind}: kill {i} {delay:.2f} s after progress, resumed at {seeks}; "
                  f"markers then at {upto}")
        assert mid_stream >= 3, f"only {mid_stream} kills landed before the end"
        producer.join(timeout=120)
        assert produced.get("failed") == 0 and sum(produced["bad"].values()) > 0, produced
        ends = topic_ends(broker.bootstrap, topic)
        assert sum(ends.values()) == RECORDS

        runs.append(final := Exporter(env, tmp_path, f"{kind}-final"))
        resumed = final.wait_event("assigned", timeout_s=60)["seeks"]
        waited = _wait_caught_up(target, topic, ends, final, timeout_s=120)
        print(f"{kind}: final run resumed at {resumed}, caught up in {waited:.1f} s")
        assert final.terminate() == 0, final.tail()
        assert "settled=True" in final.wait_event("stopped", timeout_s=5)["reason"], final.tail()

        verified = assert_exact(env, ends)
        assert sum(p["rows"] for p in verified["partitions"].values()) > 0.9 * RECORDS
        if target.secret is not None:
            for run in runs:
                assert target.secret.encode() not in run.log_path.read_bytes(), run.name
    except BaseException:
        for run in runs:
            print(run.tail(20))
        raise
    finally:
        for run in runs:
            run.close()


def test_the_usual_aws_variables_configure_an_s3_root_and_its_secret_is_never_logged(
        broker, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    target = _target("s3-aws-env", request)
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, 2000, partitions=2, seed=12, days=2, bad_share=0.01)
    ends = topic_ends(broker.bootstrap, topic)
    env = target.configure(exporter_env(broker.bootstrap, topic, target.root,
                                        WRITER_MAX_FILE_AGE_S=1))
    assert not any(k.startswith("GARMEXPORT_OUTPUT_S3") for k in env), env
    # at DEBUG: the secret must not leak there either
    run = Exporter(env, tmp_path, "s3-aws-env", {"GARMEXPORT_LOG_LEVEL": "DEBUG"})
    try:
        _wait_caught_up(target, topic, ends, run, timeout_s=120)
        assert run.terminate() == 0, run.tail()
        verified = assert_exact(env, ends)  # verify, configured from the same variables
        assert sum(p["rows"] for p in verified["partitions"].values()) > 0.9 * 2000
        assert target.secret is not None
        assert target.secret.encode() not in run.log_path.read_bytes()
    finally:
        run.close()


def test_an_hdfs_root_in_a_config_file_reaches_webhdfs_at_the_configured_http_port(
        broker, webhdfs: WebHdfsServer, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=1)
    port = webhdfs.server_address[1]
    config = tmp_path / "garmexport.toml"
    # 8020 is the NameNode's RPC port: kept in the URI for Spark, never dialled by WebHDFS
    config.write_text(f'[source]\ntopic = "{topic}"\n\n'
                      f'[kafka]\n"bootstrap.servers" = "{broker.bootstrap}"\n\n'
                      f'[output]\nroot = "hdfs://127.0.0.1:8020/warehouse/garmadon"\n'
                      f'hdfs_user = "{HDFS_USER}"\nhdfs_http_port = {port}\n')
    env = {**_outside_env(), "GARMEXPORT_CONFIG": str(config)}
    # verify reads a root, never makes one: the path must exist, in HDFS's namespace
    (Path(webhdfs.data_dir) / "warehouse" / "garmadon").mkdir(parents=True)
    done = subprocess.run([PYTHON, "-m", "garmexport", "verify", "--json"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    paths = {path for _, _, path in webhdfs.faults.requests}
    assert paths and all(p.startswith("/webhdfs/v1/warehouse/garmadon") for p in paths), paths

