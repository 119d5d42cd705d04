"""An exporter that the group does not assign partitions to says so every 30 s or so.

A real ``garmexport run`` joins a group whose only other member, a plain consumer of the
test, got its assignment and then stopped polling (its heartbeats go on from librdkafka's
thread): the group cannot finish the rebalance the exporter's join starts until that
member polls again or ``max.poll.interval.ms`` runs out, so the exporter holds nothing
and, before this, logged nothing. It must log ``waiting_for_assignment`` with the group
and the time waited, about every 30 s, and still stop cleanly. The way out the README
gives works: on this broker the group stays stuck even after the stalled member leaves
(the case seen in the field: a member left mid-join), and an exporter started with a new
``source.group_id`` exports every record exactly once, since progress lives in the
output, not in the group.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer

from tests.integration.harness import (
    Exporter, export_all_exactly_once, exporter_env, exporter_runs, produce,
)


def test_an_exporter_the_group_keeps_waiting_logs_waiting_for_assignment(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=2)
    root = str(tmp_path / "out")
    group = f"stalled-{topic}"
    produce(broker.bootstrap, topic, 500, partitions=2, seed=4, days=1)
    stalled = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                        "max.poll.interval.ms": 300_000, "enable.auto.commit": False})
    stalled.subscribe([topic])
    deadline = time.monotonic() + 60
    while not stalled.assignment():
        stalled.poll(0.2)
        assert time.monotonic() < deadline, "the stalled member got no assignment"
    env = exporter_env(broker.bootstrap, topic, root, SOURCE_GROUP_ID=group, WRITER_MAX_FILE_AGE_S=1)
    try:
        with exporter_runs() as runs:
            run = Exporter(env, tmp_path, "waits")
            runs.append(run)
            started = time.monotonic()
            first = run.wait_event("waiting_for_assignment", timeout_s=60)
            assert first["level"] == "WARNING" and first["group"] == group, first
            assert first["topic"] == topic and 29 <= first["waited_s"] <= 45, first
            second = run.wait_event("waiting_for_assignment", timeout_s=45, count=2)
            assert 25 <= second["waited_s"] - first["waited_s"] <= 40, (first, second)
            assert run.events("assigned") == [], run.tail()
            print(f"two waiting lines in {time.monotonic() - started:.0f} s: {first} {second}")
            assert run.terminate() == 0, run.tail()  # waiting, it still stops cleanly
    finally:
        stalled.close()
    env = exporter_env(broker.bootstrap, topic, root, SOURCE_GROUP_ID=f"{group}-new",
                       WRITER_MAX_FILE_AGE_S=1)
    export_all_exactly_once(env, tmp_path, "new-group")
