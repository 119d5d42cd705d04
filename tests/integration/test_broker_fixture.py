"""The test broker: starts, isolates topics, reads topics to their end, stops."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer

from tests.broker import GROUP_SETTINGS, consume_all


def produce(bootstrap: str, topic: str, values: list[tuple[int, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, value in values:
        producer.produce(topic, value=value, partition=partition, timestamp=1_700_000_000_000)
    assert producer.flush(15) == 0


def test_new_topics_are_distinct_and_have_the_asked_partitions(broker):
    first, second = broker.new_topic(partitions=3), broker.new_topic(partitions=1)
    assert first != second
    topics = broker.admin().list_topics(timeout=5).topics
    assert len(topics[first].partitions) == 3
    assert len(topics[second].partitions) == 1


def test_consume_all_reads_every_record_in_partition_and_offset_order(broker):
    topic = broker.new_topic(partitions=3)
    # Many records per partition so the producer sends multi-record batches: the case where
    # tansu's queried high watermark is wrong and only fetch-time EOF is right.
    values = [(i % 2, b"v%d" % i) for i in range(2000)] + [(0, None)]
    produce(broker.bootstrap, topic, values)
    records = consume_all(broker.bootstrap, topic)
    assert [(r.partition, r.offset) for r in records] == (
        [(0, o) for o in range(1001)] + [(1, o) for o in range(1000)])
    assert [r.value for r in records if r.partition == 1] == [b"v%d" % i for i in range(1, 2000, 2)]
    assert records[1000].value is None  # a null value survives the round trip
    assert {r.timestamp_ms for r in records} == {1_700_000_000_000}
    assert {r.key for r in records} == {None}


def test_consume_all_of_an_empty_topic_is_empty(broker):
    assert consume_all(broker.bootstrap, broker.new_topic(partitions=2), timeout_s=20) == []


def test_a_consumer_group_gets_every_partition_with_test_timings(broker):
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, [(0, b"a"), (1, b"b")])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         **GROUP_SETTINGS})
    try:
        consumer.subscribe([topic])
        seen: set[bytes] = set()
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
            if seen == {b"a", b"b"}:
                break
        assert seen == {b"a", b"b"}
        assert {tp.partition for tp in consumer.assignment()} == {0, 1}
    finally:
        consumer.close()


def test_own_broker_is_a_separate_process_that_can_be_stopped(own_broker, broker):
    assert own_broker.bootstrap != broker.bootstrap
    topic = own_broker.new_topic(partitions=1)
    produce(own_broker.bootstrap, topic, [(0, b"x")])
    own_broker.stop()
    assert own_broker.process.poll() is not None
    assert topic not in broker.admin().list_topics(timeout=5).topics
