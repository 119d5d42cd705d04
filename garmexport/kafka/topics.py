"""Topics through Kafka's admin API: the one place that builds an admin client, and the
making of a topic for ``produce``, the demo and the tests' broker.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from garmexport.errors import BrokerError
from garmexport.kafka.client_callbacks import client_log_settings

#: Keys of ``[kafka]`` that say where and how to connect, which every client needs (a
#: producer's or an admin client's), unlike a consumer's own.
CONNECTION_PREFIXES = ("bootstrap.", "security.", "sasl.", "ssl.", "client.", "socket.")


def connection_settings(settings: Mapping[str, object]) -> dict[str, object]:
    """The keys of ``settings`` that say where and how to connect."""
    return {k: v for k, v in settings.items() if k.startswith(CONNECTION_PREFIXES)}


def admin_client(settings: Mapping[str, object], quiet: bool = False) -> AdminClient:
    """An admin client over the connection keys of ``settings``; ``quiet``: its connection
    errors are not logged (a caller that reports the failure itself)."""
    return AdminClient({**connection_settings(settings), **client_log_settings(quiet)})


def ensure_topic(settings: Mapping[str, object], topic: str, partitions: int) -> int:
    """Create ``topic`` with ``partitions`` unless it exists with at least that many;
    return the partitions it has.

    The topic is looked up in the list of all topics, never by name: a metadata request
    that names a missing topic makes a broker with ``auto.create.topics.enable`` create it
    with its default partition count (tansu: 4), which would win over ``partitions``.
    Raises BrokerError if the broker cannot be reached or the topic has fewer partitions.
    """
    admin = admin_client(settings)
    try:
        existing = admin.list_topics(timeout=10).topics.get(topic)
        if existing is None or existing.error is not None:
            future = admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic]
            try:
                future.result(timeout=15)
            except KafkaException as e:
                if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
            existing = admin.list_topics(timeout=10).topics.get(topic)
    except KafkaException as e:
        raise BrokerError(f"cannot create or describe topic {topic}: {e}") from e
    finally:
        admin.poll(0)  # serves its log lines (why it failed) to the logger
    have = len(existing.partitions) if existing else 0
    if have < partitions:
        raise BrokerError(f"topic {topic} has {have} partitions, {partitions} were asked for")
    return have


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create ``name`` with ``partitions`` partitions and wait until all have a leader."""
    admin = admin_client({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions,
                                  replication_factor=1)])[name].result(timeout=15)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if topic and topic.error is None and len(topic.partitions) == partitions:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} did not get {partitions} partitions")


def answers(bootstrap: str, timeout_s: float) -> bool:
    """Whether a broker at ``bootstrap`` answers a metadata request within ``timeout_s``."""
    try:
        admin_client({"bootstrap.servers": bootstrap}, quiet=True).list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return True
