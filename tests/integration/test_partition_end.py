"""Reading a topic up to its end as the read began, against the real broker, while records
keep arriving: the read ends, hands over every record below the end once and in order,
none past it; an empty partition and a quiet one end at their ends too. The cases tansu
cannot make (retention, a first fetch that comes late): tests/unit/kafka/test_partition_end.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from garmexport.kafka.record_probe import read_ends
from garmexport.kafka.topic_scan import scan

SETTINGS = {"fetch.queue.backoff.ms": 10}


def test_a_partition_records_keep_arriving_at_is_read_to_its_end_as_the_read_began(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(4_000):  # 0 and 1 hold records, 2 stays empty
        producer.produce(topic, b"r%d" % i, partition=i % 2)
    producer.flush(30)
    stop, sent = threading.Event(), [0]

    def feed() -> None:  # partition 0, about 5,000 records/s, until told to stop
        while not stop.is_set():
            for _ in range(50):
                producer.produce(topic, b"late", partition=0)
            sent[0] += 50
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(30)

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    settings = {"bootstrap.servers": broker.bootstrap, **SETTINGS}
    try:
        time.sleep(0.5)
        got: dict[int, list[int]] = {}
        firsts: dict[int, int] = {}
        before = 2_000 + sent[0]  # partition 0's records before the read began, at least
        started = time.monotonic()
        ends = scan(settings, topic, lambda p, recs: got.setdefault(p, []).extend(
            r.offset() for r in recs), timeout_s=20, firsts=firsts)
        took = time.monotonic() - started
        probed = read_ends(settings, topic, [0, 1, 2], timeout_s=20)
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join(30)
    print(f"scan took {took:.2f} s; ends {ends}, then {probed}")
    assert took < 10, took
    assert ends[0] >= before and ends[1] == 2_000 and ends[2] == 0, ends
    assert got[0] == list(range(ends[0])) and got[1] == list(range(2_000)) and 2 not in got
    assert firsts == {0: 0, 1: 0, 2: 0}
    # the offsets tool's end: of a later read, on the same live partition
    assert probed[1] == (0, 2_000) and probed[2] == (0, 0)
    assert ends[0] <= probed[0][1] <= 2_000 + sent[0], (ends, probed, sent)
    # the feed went on past both: each read stopped at its end, not at the topic's
    after = scan(settings, topic, lambda p, recs: None, timeout_s=20)
    assert after[0] == 2_000 + sent[0] > probed[0][1], (after, probed, sent)
