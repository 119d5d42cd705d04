"""Exactly once on a real HDFS, the hard way, then the operator tools against that root.

Two instances with the defaults (reader processes: two on this 2-core machine) share one
consumer group and export a stream (8 partitions, three days, late events, bad records)
to a ``webhdfs://`` root on the session's real NameNode and DataNodes. While the stream
flows, whole instances are SIGKILLed at seeded random moments and started again. Then one
instance is replaced by a zombie: its readers stop themselves (SIGSTOP, the test's crash
hook) right after the intent of a file and before its publish, and stay stopped past their
session timeout. The group gives their partitions to the other readers, which resume from
the same committed state and publish the same names; only when every such name exists
are the zombies continued, so their stale publish certainly reaches the NameNode, which
refuses it (RENAME onto a name that exists answers false: ``fenced``). At the end ``garmexport verify`` reads every row of
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

from garmexport.pipeline.crash_points import CRASH_ENV
from garmexport.protocol.naming import (
    DATA, OFFSETS_DIR, FileName, IntentName, chain_path, intent_path,
)
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
FREEZE_AT = 3  # a zombie's reader stops after the intent of its third file


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
            hook = {CRASH_ENV: f"intent:{FREEZE_AT}:stop"} if name == "zombie" else {}
            runs.append(Exporter(env, tmp_path, name, extra_env=hook))
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

        # A zombie at a chosen point: A is replaced by an instance whose readers stop
        # after an intent, before its publish, and are continued only once the others
        # have published every name such an intent announces.
        _kill_instance(live["a"])
        zombie = live["a"] = start("zombie")  # see start(): the crash hook's env
        pids = reader_pids(zombie)
        _wait_stopped(pids, timeout_s=90)
        said(f"zombie: readers {sorted(pids)} stopped after an intent")
        storage = open_storage(hdfs_root.uri, "probe", options({"hdfs_user": USER}))
        try:
            stale = _unpublished(storage)
            assert stale, "a stopped reader's intent must name a file not yet published"
            waited = _wait_published(storage, stale, timeout_s=120)
        finally:
            storage.close()
            for pid in pids.values():
                os.kill(pid, signal.SIGCONT)
        said(f"zombie: {len(stale)} announced names published by the others after "
             f"{waited:.1f} s; continued")
        for reader in pids:
            zombie.wait_event("fenced", timeout_s=60, where=lambda d, r=reader: d["reader"] == r)

        producer.join(timeout=180)
        assert not producer.is_alive() and produced.get("failed") == 0, produced
        ends = topic_ends(broker.bootstrap, topic)
        assert sum(ends.values()) == RECORDS

        def alive() -> None:
            for run in live.values():
                run.check_alive()

        waited = wait_caught_up(hdfs_root.uri, topic, ends, timeout_s=240, alive=alive)
        _, body = zombie.http_get("/metrics", timeout_s=10)
        counted = by_reader(body, "garmexport_fencing_conflicts_total")
        for reader in pids:  # every refused publish counted once, and logged once
            fenced = [d for d in zombie.events("fenced") if d["reader"] == reader]
            assert counted[reader] == len(fenced) >= 1, (reader, counted, fenced)
        said(f"caught up {waited:.1f} s after the stream; the zombie's publishes refused "
             f"by the NameNode: {counted}")
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


def _wait_stopped(pids: dict[str, int], timeout_s: float) -> None:
    """Until every process of ``pids`` (name -> pid) is stopped (state T)."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = {name: Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                  for name, pid in pids.items()}
        if all(state == "T" for state in states.values()):
            return
        assert time.monotonic() < deadline, f"readers not stopped by the hook: {states}"
        time.sleep(0.2)


def _unpublished(storage) -> dict[str, str]:
    """Intent path -> the file it announces, for every intent whose file does not exist."""
    stale = {}
    for stream in (e.name for e in storage.list(OFFSETS_DIR) if e.is_dir):
        source, topic = stream.split("+", 1)
        for part in (e.name for e in storage.list(f"{OFFSETS_DIR}/{stream}") if e.is_dir):
            for entry in storage.list(f"{OFFSETS_DIR}/{stream}/{part}"):
                intent = IntentName.parse(entry.name)
                if intent is None:
                    continue
                name = FileName(source, topic, int(part), intent.first_offset,
                                None if intent.kind == DATA else intent.origin)
                path = chain_path(intent.origin, intent.kind, intent.day, name)
                if not storage.exists(path):
                    stale[intent_path(source, topic, int(part), intent)] = path
    return stale


def _wait_published(storage, stale: dict[str, str], timeout_s: float) -> float:
    """Seconds until each file of ``stale`` exists (or its intent is gone: a marker passed
    it, so it was published)."""
    began = time.monotonic()
    left = dict(stale)
    while left:
        left = {i: f for i, f in left.items() if storage.exists(i) and not storage.exists(f)}
        assert time.monotonic() - began < timeout_s, f"not published by the others: {left}"
        time.sleep(0.5)
    return time.monotonic() - began


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
