"""Reading partitions to their end with an assigned consumer: the one loop behind
``verify``'s read of a whole topic (:mod:`garmexport.tools.broker_scan`) and ``offsets``'
end of each partition (:mod:`garmexport.kafka.record_probe`).

The end of a partition is where an assigned consumer (no group, no committed offsets) gets
the partition EOF event, never a queried high watermark alone: that one is wrong on some
brokers after multi-record batches (tansu answers the base offset of the last batch + 1).
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
    """Where a partition's read ended: ``next_offset``, its last record's offset + 1 (the
    start when no record came), and ``eof_offset``, the position of its EOF event (-1
    before one; on Kafka it counts trailing transaction markers, which no record shows)."""

    next_offset: int
    eof_offset: int = -1


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
                on_records: Callable[[int, list], None] = lambda p, records: None,
                on_eof: Callable[[int], None] = lambda p: None, *, chunk: int = 1000,
                poll_s: float = 0.2, follow: bool = False) -> dict[int, Reached]:
    """Read the partitions of ``topic`` from ``starts`` (partition -> offset, or a logical
    offset such as ``OFFSET_BEGINNING``) until each has reached its EOF; where each ended.

    ``on_records(partition, records)`` gets the records as they come; ``on_eof(partition)``
    runs at the partition's EOF. ``follow``: a partition that gets records after its EOF
    is read on to a later EOF (a whole-topic read), else its first EOF ends it (records
    that came in the same chunk are still handed over). Raises BrokerError on a broker
    error, or when a partition has not reached its end within ``timeout_s``.
    """
    reached = {p: Reached(max(offset, 0)) for p, offset in starts.items()}
    consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    pending = set(starts)
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise BrokerError(f"partitions {sorted(pending)} of {topic!r} did not reach their "
                              f"end within {timeout_s:g} s")
        by_part: dict[int, list] = {}
        for msg in consumer.consume(chunk, poll_s):
            err, p = msg.error(), msg.partition()
            if err is None:
                by_part.setdefault(p, []).append(msg)
                if follow:
                    pending.add(p)
            elif err.code() == KafkaError._PARTITION_EOF:
                reached[p].eof_offset = max(reached[p].eof_offset, msg.offset())
                pending.discard(p)  # EOF follows its partition's records
                on_eof(p)
            else:
                raise BrokerError(f"reading {topic!r}: {err}")
        for p, records in by_part.items():
            reached[p].next_offset = max(reached[p].next_offset, records[-1].offset() + 1)
            on_records(p, records)
    return reached
