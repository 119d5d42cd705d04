"""A rare type must not hold the restart position back (DESIGN.md 4.4, heartbeats).

Each partition starts with one FLINK_KAFKA_CONSUMER_EVENT and then holds only FS and GC
events. Without heartbeat markers the rare type's W would stay at its first offset and
every restart would re-read the whole partition. After a run that caught up and a clean
stop, a restart must resume near the head of every partition.
"""

from __future__ import annotations

import random
from pathlib import Path

from confluent_kafka import Producer

from garmexport.wire import frames
from garmexport.wire.events import REGISTRY
from garmexport.testbed.generator_messages import body, headers
from tests.integration.harness import (
    NOW_MS, Exporter, assert_exact, exporter_env, produce, topic_ends, wait_caught_up,
)

PARTITIONS = 4
COMMON = 40_000
RARE = 5005  # FLINK_KAFKA_CONSUMER_EVENT, output "flink_kafka_consumer"


def produce_rare_first(bootstrap: str, topic: str) -> None:
    """One rare event at offset 0 of every partition."""
    rng = random.Random(5)
    _, header = headers(rng, 1)["FLINK"][0]
    rare = REGISTRY[RARE]
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(PARTITIONS):
        value = frames.encode(RARE, NOW_MS - 3_600_000, header, body(rng, rare))
        producer.produce(topic, value=value, partition=p, timestamp=NOW_MS - 3_600_000)
    assert producer.flush(30) == 0


def test_a_restart_resumes_near_the_head_although_a_rare_type_appeared_only_at_the_start(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    produce_rare_first(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, COMMON, partitions=PARTITIONS, seed=3, days=1,
            late_share=0.0, mix={"FS_EVENT": 1, "GC_EVENT": 1})
    ends = topic_ends(broker.bootstrap, topic)
    assert ends == {p: 1 + COMMON // PARTITIONS for p in range(PARTITIONS)}
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1)
    runs: list[Exporter] = []
    try:
        first = Exporter(env, tmp_path, "first")
        runs.append(first)
        assert first.wait_event("assigned", timeout_s=60)["seeks"] == {
            str(p): None for p in range(PARTITIONS)}
        wait_caught_up(str(root), topic, ends, timeout_s=90,
                       alive=first.check_alive)
        assert first.terminate() == 0, first.tail()

        second = Exporter(env, tmp_path, "second")
        runs.append(second)
        seeks = second.wait_event("assigned", timeout_s=60)["seeks"]
        print(f"restart seeks {seeks}, ends {ends}")
        for p, end in ends.items():
            assert seeks[str(p)] is not None and seeks[str(p)] >= 0.9 * end, (p, seeks, ends)
        assert second.terminate() == 0, second.tail()

        rare_files = list((root / "flink_kafka_consumer").rglob("*.parquet"))
        assert len(rare_files) == PARTITIONS, rare_files
        assert_exact(env, ends)
    except BaseException:
        for run in runs:
            print(run.tail(30))
        raise
    finally:
        for run in runs:
            run.close()
