"""Exactly once on a real HDFS, the hard way, then the operator tools against that root.

Two instances with the defaults (reader processes: two on this 2-core machine) share one
consumer group and export a stream (8 partitions, three days, late events, bad records)
to a ``webhdfs://`` root on the session's real NameNode and DataNodes. While the stream
flows, whole instances are SIGKILLed at seeded random moments and started again, and one
reader is frozen (SIGSTOP) past its session timeout while records keep coming: the group
gives its partitions to the other readers, and when it is continued, whatever it still
publishes of them is refused by the NameNode (RENAME onto a name that exists answers
false: ``fenced``) or dropped as lost. At the end ``garmexport verify`` reads every row of
the root back and counts it per (partition, offset), ``garmexport offsets`` shows every
partition committed to its end, and ``garmexport repair`` fills a data file deleted from
the NameNode, once, after which verify is exact again.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

from garmexport.storage.open import open_storage
from tests.hdfs.conftest import USER, HdfsRoot
from tests.integration.harness import (
    PYTHON, ROOT, Exporter, assert_exact, exporter_env, exporter_runs, produce_in_background,
    published_line, repair, topic_ends, verify, wait_caught_up,
)
from tests.integration.test_parallelism import by_reader, reader_pids
from tests.storage.conftest import options

RECORDS = 32_000
RATE = 1_200  # records/s: the stream lasts about 27 s, so every kill and the freeze land in it
PARTITIONS = 8
SEED = 20261201
SESSION_MS = 3000
FROZEN_S = 9.0  # past the session timeout, with room for the group's rebalance


def _env(broker, topic: str, root: HdfsRoot) -> dict[str, str]:
    return exporter_env(
        broker.bootstrap, topic, root.uri, OUTPUT_HDFS_USER=USER,
        ACTORS_PARALLELISM=None,  # the defaults: reader processes, one per usable core
        SOURCE_GROUP_ID=f"g-{topic}", WRITER_MAX_FILE_AGE_S=2,
        PROTOCOL_HEARTBEAT_INTERVAL_S=1, KAFKA_SESSION_TIMEOUT_MS=SESSION_MS)


def _kill_instance(run: Exporter) -> None:
    """SIGKILL the supervisor and its readers at once (a container killed whole)."""
    pids = [run.pid, *reader_pids(run).values()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    run.process.wait(timeout=30)


def test_two_instances_on_a_real_namenode_stay_exact_across_kills_and_a_zombie(
        broker, hdfs_root: HdfsRoot, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    env = _env(broker, topic, hdfs_root)
    rng = random.Random(SEED)
    began = time.monotonic()

    def said(what: str) -> None:
        print(f"{time.monotonic() - began:6.1f} s: {what}")

    with exporter_runs() as runs:
        def start(name: str) -> Exporter:
            runs.append(Exporter(env, tmp_path, name))
            return runs[-1]

        producer, produced = produce_in_background(
            broker.bootstrap, topic, RECORDS, partitions=PARTITIONS, seed=41, days=3,
            late_share=0.1, bad_share=0.002, rate=RATE)
        live = {"a": start("a"), "b": start("b")}
        for run in live.values():
            run.wait_event("assigned", timeout_s=90, where=lambda d: d["partitions"])

        # Random kills of whole instances while the stream flows, each restarted.
        for i in range(3):
            time.sleep(rng.uniform(1.0, 3.0))
            victim = rng.choice(sorted(live))
            _kill_instance(live[victim])
            live[victim] = start(f"{victim}{i}")
            live[victim].wait_event("assigned", timeout_s=90,
                                    where=lambda d: d["partitions"])
            said(f"kill {i}: {victim} killed and restarted")

        # A zombie: one reader of A frozen past its session timeout while records flow.
        zombie = live["a"]
        pids = reader_pids(zombie)
        zombie.wait_event("first_record", timeout_s=60, where=lambda d: d["reader"] == "r1")
        os.kill(pids["r1"], signal.SIGSTOP)
        try:
            time.sleep(FROZEN_S)
            # the others took its partitions: some reader of B was assigned again meanwhile
            live["b"].wait_event("assigned", timeout_s=60, count=2,
                                 where=lambda d: d["partitions"])
        finally:
            os.kill(pids["r1"], signal.SIGCONT)
        zombie.wait_event("reader_answering_again", timeout_s=30)

        producer.join(timeout=180)
        assert not producer.is_alive() and produced.get("failed") == 0, produced
        ends = topic_ends(broker.bootstrap, topic)
        assert sum(ends.values()) == RECORDS

        def alive() -> None:
            for run in live.values():
                run.check_alive()

        waited = wait_caught_up(hdfs_root.uri, topic, ends, timeout_s=240, alive=alive)
        fenced = [d for d in zombie.events("fenced") if d["reader"] == "r1"]
        lost = [d for d in zombie.events("lost") if d["reader"] == "r1"]
        _, body = zombie.http_get("/metrics", timeout_s=10)
        counted = by_reader(body, "garmexport_fencing_conflicts_total")["r1"]
        said(f"caught up {waited:.1f} s after the stream; the zombie: {len(fenced)} "
             f"publishes refused by the NameNode, {len(lost)} losses noticed")
        assert fenced or lost, zombie.tail()
        assert counted == len(fenced), (counted, fenced)
        for run in live.values():
            assert run.terminate() == 0, run.tail()

    report = assert_exact(env, ends)
    assert sum(p["rows"] for p in report["partitions"].values()) > 0.9 * RECORDS
    said("verify: exact")

    # offsets: every partition committed to its end, read from the NameNode
    shown = subprocess.run([PYTHON, "-m", "garmexport", "offsets", "--json"], env=env,
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    doc = json.loads(shown.stdout)
    seeks = {int(p["partition"]): p for p in doc["partitions"]}
    assert sorted(seeks) == list(range(PARTITIONS)), doc
    for p, end in ends.items():
        assert seeks[p]["lag"] == 0, (p, end, seeks[p])

    said("offsets: every partition at its end")
    # repair: a data file deleted on the NameNode is missing for verify, filled once
    storage = open_storage(hdfs_root.uri, "probe", options({"hdfs_user": USER}))
    try:
        victim = _a_data_file(storage)
        storage.delete(victim)
    finally:
        storage.close()
    code, broken = verify(env)
    missing = sum(p["missing"] for p in broken["partitions"].values())
    assert code == 1 and missing > 0, broken
    dry = repair(env)
    assert dry.returncode == 1 and ": would add " in dry.stdout, dry.stdout + dry.stderr
    applied = repair(env, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert [line for line in applied.stdout.splitlines() if published_line(line)], applied.stdout
    again = repair(env, "--apply")
    assert again.returncode == 0, again.stdout + again.stderr
    assert not [line for line in again.stdout.splitlines() if published_line(line)], again.stdout
    assert_exact(env, ends)
    said("repair: filled once, verify exact again")


def _a_data_file(storage) -> str:
    """The path of the largest data file of the first dataset with files."""
    for dataset in sorted(e.name for e in storage.list("") if e.is_dir
                          and not e.name.startswith(("_", "."))):
        for day in sorted(e.name for e in storage.list(dataset) if e.is_dir):
            files = [e for e in storage.list(f"{dataset}/{day}")
                     if e.name.endswith(".parquet")]
            if files:
                biggest = max(files, key=lambda e: e.size)
                return f"{dataset}/{day}/{biggest.name}"
    raise AssertionError("no data file in the output")
