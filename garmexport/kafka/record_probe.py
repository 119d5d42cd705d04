"""Reading a topic's partitions one record or one end at a time, for ``garmexport offsets``:
the end of each partition, and the first record at or after an offset or a time.

Correct on both tansu and real Kafka:

- **End of a partition** (:func:`read_ends`): a queried high watermark is exact on Kafka but,
  on tansu, only the base offset of the last batch + 1, so it is used as a place to start
  from only. An assigned consumer (no group) reads from one below it: the end is the
  watermark that came with its first fetch (:func:`~garmexport.kafka.partition_end.read_to_end`),
  right on both (and counting trailing transaction markers on Kafka); a partition that
  records keep arriving at ends there too.
- **Offset of a time** (:class:`RecordProbe`): ``offsets_for_times`` first; tansu answers 0
  whatever the time, so the answer is only a hint that
  :func:`garmexport.offsets.start_at.first_offset_at_or_after` checks against the records around
  it, falling back to a binary search that fetches one record per step. Tested here against
  tansu (the fallback) and with a fake broker in unit tests (the hint check); the path
  where a real Kafka's answer is accepted has not run against a real Kafka.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from garmexport.errors import BrokerError
from garmexport.kafka.partition_end import assigned_consumer, read_to_end


def _consumer(settings: Mapping[str, object]) -> Consumer:
    return assigned_consumer(settings, f"garmexport-offsets-{uuid.uuid4().hex[:8]}")


def read_ends(settings: Mapping[str, object], topic: str, partitions: list[int],
              timeout_s: float) -> dict[int, tuple[int, int]]:
    """(log start, end offset = last offset + 1) per partition, the end as the read began
    (see the module docstring). Raises BrokerError on a broker error or when a partition's
    end is not reached within ``timeout_s``."""
    consumer = _consumer(settings)
    try:
        lows, starts = {}, {}
        for p in partitions:
            low, queried = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            lows[p] = max(low, 0)
            starts[p] = max(lows[p], queried - 1)
        reached = read_to_end(consumer, topic, starts, timeout_s)
        return {p: (lows[p], reached[p].end) for p in partitions}
    except KafkaException as exc:
        raise BrokerError(f"reading the end of {topic!r}: {exc}") from None
    finally:
        consumer.close()


class RecordProbe:
    """Single-record fetches and timestamp lookups on one topic (one assigned consumer)."""

    def __init__(self, settings: Mapping[str, object], topic: str, timeout_s: float) -> None:
        self.topic, self.timeout_s = topic, timeout_s
        self.consumer = _consumer(settings)

    def at(self, partition: int, offset: int) -> tuple[int, int] | None:
        """(offset, Kafka timestamp ms) of the first record at or after ``offset``; None at
        the end of the partition. Raises BrokerError."""
        self.consumer.assign([TopicPartition(self.topic, partition, offset)])
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            m = self.consumer.poll(0.5)
            if m is None or m.partition() != partition:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return None
                raise BrokerError(f"fetching {self.topic}[{partition}]@{offset}: {err}")
            if m.offset() >= offset:  # anything older is from a previous assignment
                return m.offset(), m.timestamp()[1]
        raise BrokerError(f"no record nor EOF at {self.topic}[{partition}]@{offset} "
                          f"within {self.timeout_s} s")

    def offsets_for_times(self, partition: int, timestamp_ms: int, end: int) -> int | None:
        """The broker's answer (``end`` for "no such record"), or None if it gave none."""
        try:
            [tp] = self.consumer.offsets_for_times(
                [TopicPartition(self.topic, partition, timestamp_ms)], timeout=self.timeout_s)
        except KafkaException:
            return None
        if tp.error is not None:
            return None
        return end if tp.offset < 0 else tp.offset

    def close(self) -> None:
        self.consumer.close()
