"""garmexport takes over a Garmadon JVM exporter's root on a real HDFS: nothing lost or twice.

The JVM era of a topic is written the JVM way (``tests/jvm_root.py``: ``index=`` files of
several row groups, heartbeat rows, ``.done`` checkpoints, old ``<p>.<offset>`` names in a
bare ``D`` directory, a type never written) and copied onto the real NameNode as the JVM
exporter leaves it there, owned by the exporter's user. Then garmexport runs on that
``webhdfs://`` root: ``offsets`` reads each JVM file's last offset back through WebHDFS,
two instances are SIGKILLed at random moments, a last one catches up, and ``verify`` finds
every record of the topic in exactly one data row across the JVM files and garmexport's;
the JVM files are still there, untouched.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
from pathlib import Path

from hdfs import InsecureClient

from garmexport.protocol.naming import day_name
from tests.hdfs.conftest import USER, HdfsRoot
from tests.integration.harness import (
    PYTHON, ROOT, Exporter, assert_exact, exporter_env, exporter_runs, produce, topic_ends,
    wait_caught_up,
)
from tests.integration.test_jvm_takeover import DAY_MS, NEVER_IN_JVM, jvm_era
from tests.jvm_root import build


def _upload(local: Path, root: HdfsRoot) -> dict[str, int]:
    """Copy the JVM root onto the NameNode, dot files included; path -> size."""
    client = InsecureClient(f"http://127.0.0.1:{root.cluster.http_ports[0]}", user=USER)
    sizes = {}
    try:
        for path in sorted(p for p in local.rglob("*")):
            rel = path.relative_to(local).as_posix()
            if path.is_dir():
                client.makedirs(f"{root.path}/{rel}")
                continue
            client.write(f"{root.path}/{rel}", data=path.read_bytes(), overwrite=False)
            sizes[rel] = path.stat().st_size
    finally:
        client._session.close()
    return sizes


def _listed(root: HdfsRoot, rels: list[str]) -> dict[str, int]:
    client = InsecureClient(f"http://127.0.0.1:{root.cluster.http_ports[0]}", user=USER)
    try:
        return {rel: client.status(f"{root.path}/{rel}")["length"] for rel in rels}
    finally:
        client._session.close()


def test_a_jvm_root_on_a_real_namenode_is_taken_over_with_every_record_once(
        broker, hdfs_root: HdfsRoot, tmp_path: Path) -> None:
    topic, era = jvm_era(broker, 3)
    cut = {p: recs[: int(len(recs) * (0.6 + 0.1 * p))] for p, recs in era.items()}
    oldest = min(r.kafka_ms for recs in era.values() for r in recs) // DAY_MS
    local = tmp_path / "jvm"
    built = build(local, cut, rows_per_file=250, groups_per_file=3, heartbeat_every=400,
                  old_name_day=day_name(oldest), skip_origins=[NEVER_IN_JVM])
    sizes = _upload(local, hdfs_root)
    jvm_files = sorted(f.relative_to(local).as_posix() for f in built.files)
    assert jvm_files and set(jvm_files) <= set(sizes)

    produce(broker.bootstrap, topic, 8_000, partitions=3, seed=9, days=2, late_share=0.1)
    ends = topic_ends(broker.bootstrap, topic)
    env = exporter_env(broker.bootstrap, topic, hdfs_root.uri, OUTPUT_HDFS_USER=USER,
                       WRITER_MAX_FILE_AGE_S=1, PROTOCOL_HEARTBEAT_INTERVAL_S=1,
                       SOURCE_POLL_MAX_RECORDS=300, KAFKA_SESSION_TIMEOUT_MS=2000)
    offsets = subprocess.run([PYTHON, "-m", "garmexport", "offsets", "--json"], env=env,
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert offsets.returncode == 0, offsets.stderr[-2000:]
    shown = {r["partition"]: r for r in json.loads(offsets.stdout)["partitions"]}
    for p in range(3):
        assert shown[p]["jvm"], shown[p]
        for origin, got in shown[p]["jvm"].items():
            assert got["offset"] == built.high(origin, p), (p, origin, got)
        assert shown[p]["seek"] == min(built.high(o, p) for o in shown[p]["jvm"]) + 1
        assert NEVER_IN_JVM not in shown[p]["jvm"]

    with exporter_runs() as runs:
        rng = random.Random(39)
        for i in range(2):
            pair = [Exporter(env, tmp_path, f"pair{i}-{k}") for k in range(2)]
            runs += pair
            for run in pair:
                run.wait_event("assigned", timeout_s=90)
            with contextlib.suppress(subprocess.TimeoutExpired):
                pair[0].process.wait(timeout=rng.uniform(0.5, 2.5))
            for run in pair:
                run.kill()
        assert [e for run in runs for e in run.events("jvm_takeover")], "no takeover recorded"
        final = Exporter(env, tmp_path, "final")
        runs.append(final)
        final.wait_event("assigned", timeout_s=90)
        wait_caught_up(hdfs_root.uri, topic, ends, timeout_s=300, alive=final.check_alive)
        assert final.terminate() == 0, final.tail()

    report = assert_exact(env, ends)
    assert report["jvm_files"] == len(built.files)
    for p, r in report["partitions"].items():
        assert r["jvm_rows"] == sum(len(v) for (o, pp), v in built.data.items() if pp == int(p))
        assert 0 < r["jvm_rows"] < r["rows"]
    # the JVM files are still on the NameNode, untouched
    assert _listed(hdfs_root, jvm_files) == {rel: sizes[rel] for rel in jvm_files}
