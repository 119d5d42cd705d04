"""Several exporter processes in one consumer group, joining and leaving while data flows.

A producer writes 120k records at a steady rate (so that every rebalance happens while
there is work), while exporters come and go: A starts, B joins, A is killed (SIGKILL, so
its partitions move only after its session times out), C joins, B stops cleanly (SIGTERM),
D joins. At the end every record must be in the output exactly once, and the group must
really have split the partitions between processes.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.harness import (
    Exporter, assert_exact, exporter_env, produce_in_background, topic_ends, wait_caught_up,
)

RECORDS = 120_000
RATE = 5_000  # records/s: the stream lasts about 24 s


def test_joining_and_leaving_members_export_every_record_exactly_once(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=4)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, SOURCE_GROUP_ID=f"g-{topic}")
    runs: dict[str, Exporter] = {}

    def start(name: str) -> Exporter:
        runs[name] = Exporter(env, tmp_path, name)
        return runs[name]

    def assignments(run: Exporter) -> list[list[int]]:
        return [doc["partitions"] for doc in run.events("assigned")]

    try:
        producer, produced = produce_in_background(
            broker.bootstrap, topic, RECORDS, partitions=4, seed=21, days=3, late_share=0.1,
            bad_share=0.002, rate=RATE)
        a = start("a")
        a.wait_event("assigned", timeout_s=60, where=lambda d: d["partitions"])
        time.sleep(3)
        b = start("b")
        b.wait_event("assigned", timeout_s=60, where=lambda d: d["partitions"])
        time.sleep(3)
        assert a.kill() == -9
        c = start("c")
        c.wait_event("assigned", timeout_s=60, where=lambda d: d["partitions"])
        # B takes A's partitions once A's session expires, then shares with C
        time.sleep(4)
        assert b.terminate() == 0, b.tail()
        assert "settled=True" in b.wait_event("stopped", timeout_s=5)["reason"], b.tail()
        d = start("d")
        d.wait_event("assigned", timeout_s=60, where=lambda doc: doc["partitions"])
        producer.join(timeout=120)
        assert not producer.is_alive() and produced.get("failed") == 0, produced
        ends = topic_ends(broker.bootstrap, topic)
        assert sum(ends.values()) == RECORDS

        def members_alive() -> None:
            for run in (c, d):
                run.check_alive()

        waited = wait_caught_up(str(root), topic, ends, timeout_s=120, alive=members_alive)
        for run in (c, d):
            assert run.terminate() == 0, run.tail()

        for name, run in runs.items():
            print(f"{name}: assignments {assignments(run)}, fenced {len(run.events('fenced'))}")
        print(f"caught up {waited:.1f} s after the producer finished")
        # the group really split the work: some member held a strict part of the topic
        assert any(0 < len(p) < 4 for run in runs.values() for p in assignments(run))
        assert all(assignments(run) for run in runs.values())
        assert_exact(env, ends)
    except BaseException:
        for run in runs.values():
            print(run.tail(30))
        raise
    finally:
        for run in runs.values():
            run.close()
