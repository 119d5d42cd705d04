"""Closing the consumer after its reader is gone never crashes the shutdown.

Leaving the group runs the revoke callback inside ``close()``; after a failure the reader
(an actor) is already gone, and a callback into it raised out of ``close()``
(``AttributeError: 'NoneType' object has no attribute 'actor_send'``).
"""

from __future__ import annotations

import time

from garmexport.settings.load import load_config
from garmexport.kafka.source import KafkaSource
from tests.integration.harness import produce


def test_close_does_not_call_into_a_reader_that_is_gone(broker) -> None:
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, 50, partitions=2, seed=3, days=1)
    cfg = load_config(None, {
        "GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "GARMEXPORT_SOURCE_TOPIC": topic, "GARMEXPORT_OUTPUT_ROOT": "/nonexistent",
        "GARMEXPORT_KAFKA_SESSION_TIMEOUT_MS": "3000",
        "GARMEXPORT_KAFKA_HEARTBEAT_INTERVAL_MS": "300",
    })
    assigned: list[int] = []
    revoked: list[int] = []

    def gone(partitions: list[int], lost: bool) -> None:
        revoked.extend(partitions)
        raise AttributeError("'NoneType' object has no attribute 'actor_send'")

    source = KafkaSource(cfg).bind(lambda ps: (assigned.extend(ps), {p: None for p in ps})[1], gone)
    deadline = time.monotonic() + 60
    got = 0
    while got < 50:
        assert time.monotonic() < deadline, f"assigned {assigned}, {got} records"
        got += sum(len(r) for r in source.poll(100, 0.5).values())
    assert sorted(assigned) == [0, 1]
    source.close()  # raised the callback's AttributeError before
    source.close()  # idempotent
    assert revoked == []
