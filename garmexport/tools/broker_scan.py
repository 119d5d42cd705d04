"""Reading a whole topic from the broker, to its end, for verify and the offsets tools.

The end of a partition is the partition EOF event of an assigned consumer (no group, no
committed offsets), not a queried high watermark: that query is wrong on some brokers
after multi-record batches. Records are handed over in chunks so memory stays bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from garmexport.errors import BrokerError
from garmexport.kafka.signals import client_log_settings

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
) -> dict[int, int]:
    """Feed every record of ``topic`` to ``on_records(partition, records)``; return the
    end offset (last offset + 1, or 0 when empty) reached in each partition."""
    parts = partitions_of(settings, topic)
    conf = {k: v for k, v in settings.items() if k not in ("group.id", "partition.assignment.strategy")}
    consumer = Consumer({**conf, "group.id": "garmexport-scan", "enable.auto.commit": False,
                         "enable.partition.eof": True, **client_log_settings()})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    ends = {p: 0 for p in parts}
    pending = set(parts)
    deadline = time.monotonic() + timeout_s
    try:
        while pending:
            if time.monotonic() > deadline:
                raise BrokerError(f"scan of {topic!r} did not reach the end of partitions "
                                  f"{sorted(pending)} within {timeout_s:.0f} s")
            by_part: dict[int, list] = {}
            for msg in consumer.consume(chunk, 1.0):
                err = msg.error()
                if err is None:
                    by_part.setdefault(msg.partition(), []).append(msg)
                    pending.add(msg.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())  # EOF follows its partition's records
                else:
                    raise BrokerError(f"reading {topic!r}: {err}")
            for p, records in by_part.items():
                ends[p] = records[-1].offset() + 1
                on_records(p, records)
    finally:
        consumer.close()
    return ends
