"""Reading a whole topic from the broker, up to its end as the read began, for verify,
repair and the tests, through :func:`garmexport.kafka.partition_end.read_to_end` (where
"the end" is said)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException

from garmexport.errors import BrokerError
from garmexport.kafka.partition_end import assigned_consumer, read_to_end
from garmexport.kafka.client_callbacks import client_log_settings

#: How long the first metadata request may wait: a broker that is up answers in
#: milliseconds, so a tool tells an operator within seconds that it cannot reach it.
REACH_TIMEOUT_S = 5.0


def partitions_of(settings: Mapping[str, object], topic: str,
                  timeout_s: float = REACH_TIMEOUT_S) -> list[int]:
    """The partitions of ``topic``; raises BrokerError when the broker gives no metadata
    within ``timeout_s`` (unreachable) or does not know the topic."""
    # quiet: its connection errors would repeat the one BrokerError it raises
    consumer = Consumer({**settings, "group.id": "garmexport-scan", "enable.auto.commit": False,
                         **client_log_settings(quiet=True)})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"broker unreachable: no answer from "
                          f"{settings.get('bootstrap.servers')} within {timeout_s:g} s "
                          f"({exc.args[0].str()})") from None
    finally:
        consumer.close()
    t = meta.topics.get(topic)
    if t is None or t.error is not None:
        raise BrokerError(f"topic {topic!r} not found on the broker: {t.error if t else 'absent'}")
    return sorted(t.partitions)


def scan(
    settings: Mapping[str, object],
    topic: str,
    on_records: Callable[[int, list], None],
    timeout_s: float = 300.0,
    chunk: int = 10_000,
    firsts: dict[int, int] | None = None,
) -> dict[int, int]:
    """Feed every record of ``topic`` below its end to ``on_records(partition, records)``;
    return that end per partition: the end as the read began (last offset + 1 then, 0 when
    empty; :mod:`garmexport.kafka.partition_end`), so a topic that records keep arriving at
    is read to a point rather than for ever. Records after it are not fed. ``firsts`` gets,
    per partition, the first offset the broker still holds (the first record read from the
    beginning: what retention left; the end when it left nothing)."""
    parts = partitions_of(settings, topic)
    consumer = assigned_consumer(settings, "garmexport-scan")

    def feed(partition: int, records: list) -> None:
        if firsts is not None and records:
            firsts.setdefault(partition, records[0].offset())
        on_records(partition, records)

    try:
        reached = read_to_end(consumer, topic, {p: OFFSET_BEGINNING for p in parts}, timeout_s,
                              feed, chunk=chunk, poll_s=1.0)
    finally:
        consumer.close()
    ends = {p: r.end for p, r in reached.items()}
    if firsts is not None:
        for p, end in ends.items():
            firsts.setdefault(p, end)
    return ends
