"""Reading partitions up to their end with an assigned consumer: the one loop behind
``verify``'s and ``repair``'s read of a whole topic (:mod:`garmexport.kafka.topic_scan`)
and ``offsets``' end of each partition (:mod:`garmexport.kafka.record_probe`).

**The end** of a partition, for one read, is fixed once, when the read begins: the high
watermark that comes with the partition's first fetch (``get_watermark_offsets(cached=True)``
once the consumer has fetched from it; on Kafka it counts trailing transaction markers).
Never a queried high watermark: that one is wrong on some brokers after multi-record
batches (tansu answers the base offset of the last batch + 1), and never "the next EOF
event": while records keep arriving a poll seldom ends with one, so a live partition would
never end. Records at or past the end are not handed over (they arrived after the read
began: the next run's); a partition is done once its read has passed the end (a record at
or after it, or an EOF event there), and is paused then.

Records are handed over in chunks of at most ``chunk``, per partition and in offset order,
so memory stays bounded whatever the topic holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

from garmexport.errors import BrokerError
from garmexport.kafka.client_callbacks import client_log_settings


@dataclass
class Reached:
    """One partition's read: ``end``, the partition's end as the read began (see the module
    docstring; -1 until its first fetch); ``next_offset``, the last handed-over record's
    offset + 1 (the start when none came); ``past_end``, records read at or after ``end``
    and not handed over."""

    next_offset: int
    end: int = -1
    past_end: int = 0


def assigned_consumer(settings: Mapping[str, object], group: str,
                      quiet: bool = False) -> Consumer:
    """A consumer for assigning partitions by hand, with partition EOF events; ``group``
    only names it (nothing is committed). ``quiet``: no client log lines (a caller that
    reports the one error itself)."""
    conf = {k: v for k, v in settings.items()
            if k not in ("group.id", "partition.assignment.strategy")}
    return Consumer({**conf, "group.id": group, "enable.auto.commit": False,
                     "enable.partition.eof": True, **client_log_settings(quiet=quiet)})


def read_to_end(consumer: Consumer, topic: str, starts: Mapping[int, int], timeout_s: float,
                on_records: Callable[[int, list], None] = lambda p, records: None, *,
                chunk: int = 1000, poll_s: float = 0.2) -> dict[int, Reached]:
    """Read the partitions of ``topic`` from ``starts`` (partition -> offset, or a logical
    offset such as ``OFFSET_BEGINNING``) up to their end as the read began (module
    docstring); how each read went.

    ``on_records(partition, records)`` gets the records below the end as they come. Raises
    BrokerError on a broker error, or when a partition has not reached its end within
    ``timeout_s``.
    """
    reached = {p: Reached(max(offset, 0)) for p, offset in starts.items()}
    # per partition, how far its read has come: past every record seen (handed over or
    # not) and up to its latest EOF event
    at = {p: r.next_offset for p, r in reached.items()}
    consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    pending = set(starts)
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            where = ", ".join(f"{p}: at {at[p]} of {reached[p].end}" if reached[p].end >= 0
                              else f"{p}: no fetch answered" for p in sorted(pending))
            raise BrokerError(f"partitions {sorted(pending)} of {topic!r} did not reach their "
                              f"end within {timeout_s:g} s ({where})")
        # short polls until every end is fixed, so that it is the end as the read began
        fixed = all(reached[p].end >= 0 for p in pending)
        msgs = consumer.consume(chunk, poll_s if fixed else min(poll_s, 0.05))
        # after the poll: the watermark of the fetch that brought a partition's first
        # records (or its EOF) is at least past them
        for p in pending:
            if reached[p].end < 0:
                high = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1]
                if high >= 0:
                    reached[p].end = high
        by_part: dict[int, list] = {}
        for msg in msgs:
            err, p = msg.error(), msg.partition()
            if err is None:
                offset, r = msg.offset(), reached[p]
                at[p] = max(at[p], offset + 1)
                if 0 <= r.end <= offset:
                    r.past_end += 1
                else:  # below the end, or before it is known: then below it, as it rises
                    by_part.setdefault(p, []).append(msg)
            elif err.code() == KafkaError._PARTITION_EOF:
                at[p] = max(at[p], msg.offset())
            else:
                raise BrokerError(f"reading {topic!r}: {err}")
        for p, records in by_part.items():
            reached[p].next_offset = records[-1].offset() + 1
            on_records(p, records)
        done = {p for p in pending if 0 <= reached[p].end <= at[p]}
        if done:
            consumer.pause([TopicPartition(topic, p) for p in done])
            pending -= done
    return reached
