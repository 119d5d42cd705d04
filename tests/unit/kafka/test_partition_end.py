"""The end of a partition's read, in the cases the test broker cannot make.

tansu has no retention (nor DeleteRecords: it drops the connection), and its first fetches
come when they come. A scripted consumer plays what librdkafka hands over in each:
records, partition EOF events, and the watermark of the fetches so far (the
``cached=True`` one, -1001 before the first). The same loop against the real broker, with
records arriving while it reads: tests/integration/test_partition_end.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from garmexport.kafka.partition_end import read_to_end

INVALID = -1001  # librdkafka's "no watermark yet"


class Msg:
    def __init__(self, partition: int, offset: int, eof: bool = False) -> None:
        self._p, self._o, self._eof = partition, offset, eof

    def error(self) -> KafkaError | None:
        return KafkaError(KafkaError._PARTITION_EOF) if self._eof else None

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class ScriptedConsumer:
    """Each ``consume`` hands over the next step's messages; its watermarks (partition ->
    high watermark of the fetches so far) hold from then on."""

    def __init__(self, steps: Iterable[tuple[list[Msg], dict[int, int]]]) -> None:
        self.steps, self.high = list(steps), {}  # type: ignore[var-annotated]
        self.paused: list[int] = []

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = [(tp.partition, tp.offset) for tp in tps]

    def consume(self, n: int, timeout: float) -> list[Msg]:
        if not self.steps:
            return []
        msgs, high = self.steps.pop(0)
        self.high.update(high)
        return msgs

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        assert cached, "a queried watermark is wrong on tansu"
        return (0, self.high.get(tp.partition, INVALID))

    def pause(self, tps: list[TopicPartition]) -> None:
        self.paused += [tp.partition for tp in tps]


def _read(steps: list, starts: dict[int, int]) -> tuple[dict, dict[int, list[int]], ScriptedConsumer]:
    consumer = ScriptedConsumer(steps)
    got: dict[int, list[int]] = {}
    reached = read_to_end(consumer, "t", starts, 5.0,  # type: ignore[arg-type]
                          lambda p, records: got.setdefault(p, []).extend(
                              m.offset() for m in records))
    return reached, got, consumer


def test_records_that_arrive_after_the_first_fetch_are_not_read() -> None:
    # the first fetch says 3; records 3.. keep coming and no EOF ever does
    steps = [([Msg(0, 0), Msg(0, 1)], {0: 3}), ([Msg(0, 2), Msg(0, 3), Msg(0, 4)], {0: 9}),
             ([Msg(0, 5)], {0: 12})]
    reached, got, consumer = _read(steps, {0: 0})
    assert got == {0: [0, 1, 2]}
    assert (reached[0].end, reached[0].next_offset, reached[0].past_end) == (3, 3, 2)
    assert consumer.paused == [0] and consumer.steps  # done: the last step never read


def test_a_topic_whose_beginning_retention_removed_is_read_from_what_is_left() -> None:
    steps = [([Msg(0, 300), Msg(0, 301)], {0: 302}), ([Msg(0, 302, eof=True)], {0: 302})]
    reached, got, _ = _read(steps, {0: OFFSET_BEGINNING})
    assert got == {0: [300, 301]} and reached[0].end == 302
    # nothing left at all: the EOF at the log's end ends it, no record handed over
    reached, got, _ = _read([([Msg(1, 500, eof=True)], {1: 500})], {1: OFFSET_BEGINNING})
    assert got == {} and (reached[1].end, reached[1].next_offset) == (500, 0)


def test_an_empty_partition_and_one_whose_first_fetch_comes_late_end_at_their_ends() -> None:
    steps = [([], {}),  # nothing fetched yet
             ([Msg(1, 0, eof=True)], {1: 0}),  # the empty one: its EOF at 0
             ([], {}),  # partition 0's first fetch still not in
             ([Msg(0, 0), Msg(0, 1)], {0: 4}),
             ([Msg(0, 2), Msg(0, 3)], {0: 6})]
    reached, got, consumer = _read(steps, {0: 0, 1: 0})
    assert got == {0: [0, 1, 2, 3]}
    assert (reached[0].end, reached[1].end, reached[1].next_offset) == (4, 0, 0)
    assert sorted(consumer.paused) == [0, 1]


def test_an_eof_at_the_end_ends_a_partition_whose_last_offsets_hold_no_record() -> None:
    # Kafka: a transaction's commit marker at offset 4 takes an offset no record shows
    steps = [([Msg(0, 2), Msg(0, 3)], {0: 5}), ([Msg(0, 5, eof=True)], {0: 5})]
    reached, got, _ = _read(steps, {0: 2})
    assert got == {0: [2, 3]} and (reached[0].end, reached[0].next_offset) == (5, 4)
