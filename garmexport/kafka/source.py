"""The Kafka consumer, subscribed once, with the rebalance callbacks wired to the reader.

The group's offsets in Kafka are never used to resume (the output is the only state);
garmexport sets ``enable.auto.commit=false`` and seeks every assigned partition to the
position its markers give. With an eager assignor the callbacks see whole assignments;
with a cooperative one they see increments, and the matching incremental calls are used.

"End of data" and lag use the high watermark that comes with fetched data
(``get_watermark_offsets(cached=True)``): a queried watermark is wrong on some brokers
(see the README) and costs a round trip. One query per partition is made at each
assignment, so that the lag is known from the assignment on rather than from the first
fetch (until which the cache is empty, or holds a watermark of an older assignment);
watermarks only grow, so the larger of the two is the right one.

The client's own log lines, errors and statistics go to :class:`KafkaSignals`: logged
through Python logging, rate limited, and turned into the broker's reachability
(:attr:`KafkaSource.broker_problem`, for readiness; :attr:`KafkaSource.rejoining` after a
session this process lost by not being scheduled).

While it holds no assignment (from the subscription, or from a revoke or a loss, until
the group assigns partitions) it logs ``waiting_for_assignment`` every
``WAITING_LOG_EVERY_S`` with the group and the time waited (:mod:`garmexport.kafka.assignment_wait`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from itertools import groupby

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Message, TopicPartition

from garmexport.settings.config import Config
from garmexport.errors import BrokerError
from garmexport.kafka.assignment_wait import AssignmentWait
from garmexport.kafka.client_callbacks import KafkaSignals
from garmexport.process.pause_watch import PauseWatch
from garmexport.observe.logs import log_event

log = logging.getLogger(__name__)
#: how often a consumer without an assignment says that it still waits for one
WAITING_LOG_EVERY_S = 30.0
#: how long the queries of the watermarks at an assignment may take together
WATERMARK_QUERY_BUDGET_S = 2.0

_error, _partition = Message.error, Message.partition


class KafkaSource:
    """Subscribes at once; :meth:`bind` names the reader's callbacks before the first poll.

    The group join runs in librdkafka's threads and takes seconds (a broker waits for the
    group's members), while the rebalance callbacks only ever run inside a poll. So
    ``garmexport run`` subscribes before it loads the rest of the exporter and starts its
    actors: both happen while the join is under way.
    """

    def __init__(self, config: Config) -> None:
        settings = config.consumer_settings()
        settings["enable.auto.commit"] = False  # the output is the only state
        self.topic = config.source.topic
        self._start = OFFSET_BEGINNING if config.source.start == "earliest" else OFFSET_END
        self._cooperative = "cooperative" in str(settings.get("partition.assignment.strategy", ""))
        self._on_assign: Callable[[list[int]], Mapping[int, int | None]] | None = None
        self._on_revoke: Callable[[list[int], bool], None] | None = None
        self._closed = False
        #: the partitions assigned now (as the callbacks said)
        self._held: set[int] = set()
        #: (low, high) watermarks queried at the latest assignment, per partition
        self._queried: dict[int, tuple[int, int]] = {}
        # a lost session right after this process was not scheduled is no broker fault
        self._pause_watch = PauseWatch().start()
        self.signals = KafkaSignals(pauses=self._pause_watch)
        self.group = config.source.group_id
        self._wait = AssignmentWait(WAITING_LOG_EVERY_S, time.monotonic())
        settings.update(self.signals.settings(settings))
        self.consumer = Consumer(settings)
        self.consumer.subscribe([self.topic], on_assign=self._assigned,
                                on_revoke=self._revoked, on_lost=self._lost)

    def bind(
        self,
        on_assign: Callable[[list[int]], Mapping[int, int | None]],
        on_revoke: Callable[[list[int], bool], None],
    ) -> KafkaSource:
        self._on_assign, self._on_revoke = on_assign, on_revoke
        return self

    def _assigned(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        assert self._on_assign is not None, "bind() comes before the first poll"
        self.signals.assigned()
        self._wait.assigned()
        self._query_watermarks([tp.partition for tp in tps])
        self._held.update(tp.partition for tp in tps)
        seeks = self._on_assign([tp.partition for tp in tps])
        positioned = [
            TopicPartition(self.topic, p, self._start if off is None else off)
            for p, off in sorted(seeks.items())
        ]
        if self._cooperative:
            consumer.incremental_assign(positioned)
        else:
            consumer.assign(positioned)

    def _revoked(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        assert self._on_revoke is not None, "bind() comes before the first poll"
        self._on_revoke([tp.partition for tp in tps], False)
        self._unassign(consumer, tps)

    def _unassign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        if self._cooperative:
            consumer.incremental_unassign(tps)
        else:
            consumer.unassign()
        # counted here, not asked of the client: during close() it raises instead
        self._held.difference_update(tp.partition for tp in tps)
        if not self._held or not self._cooperative:
            self._held.clear()
            self._wait.unassigned(time.monotonic())

    def _lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        assert self._on_revoke is not None, "bind() comes before the first poll"
        self.signals.lost(len(tps))
        self._on_revoke([tp.partition for tp in tps], True)
        self._unassign(consumer, tps)

    @property
    def broker_problem(self) -> str:
        """Why the broker is unreachable, or "" while it is reachable."""
        return self.signals.problem

    @property
    def rejoining(self) -> str:
        """Why the group session was lost while this process was not scheduled, until the
        group assigns partitions again; "" otherwise (not the broker's fault)."""
        return self.signals.rejoining

    def poll(self, max_records: int, timeout_s: float) -> dict[int, list]:
        """One batch of records grouped by partition, in offset order within each."""
        msgs = self.consumer.consume(max_records, timeout_s)
        waited = self._wait.due(time.monotonic())
        if waited is not None:
            log_event(log, "waiting_for_assignment", level=logging.WARNING, group=self.group,
                      topic=self.topic, waited_s=round(waited, 1),
                      hint="no partitions from the group yet: see the README, Operations")
        by_partition: dict[int, list] = {}
        if not any(map(_error, msgs)):
            # the usual case, without a Python step per record: a batch arrives as runs of
            # one partition's records (one run per fetched partition)
            for partition, run in groupby(msgs, _partition):
                by_partition.setdefault(partition, []).extend(run)
            return by_partition
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise BrokerError(f"fatal Kafka error: {err}")
                continue  # librdkafka retries transient errors by itself
            by_partition.setdefault(msg.partition(), []).append(msg)
        return by_partition

    def seek(self, partition: int, offset: int) -> None:
        self.consumer.seek(TopicPartition(self.topic, partition, offset))

    def pause(self, partitions: list[int]) -> None:
        self.consumer.pause([TopicPartition(self.topic, p) for p in partitions])

    def resume(self, partitions: list[int]) -> None:
        self.consumer.resume([TopicPartition(self.topic, p) for p in partitions])

    def high_watermark(self, partition: int) -> int | None:
        """The high watermark that came with the last fetch, or the one queried at the
        assignment if larger; None while neither is known."""
        try:
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), cached=True)
        except Exception:  # noqa: BLE001 - no cached value yet is not an error
            high = -1
        queried = self._queried.get(partition)
        if queried is not None:
            high = max(high, queried[1])
        return high if high >= 0 else None

    def behind(self, partition: int) -> bool:
        """Whether the high watermark is past the consumer's position: the partition has
        records waiting (in librdkafka's queue or still on the broker). Before the first
        fetch the position is not known; the configured start stands in for it."""
        high = self.high_watermark(partition)
        if high is None:
            return False
        try:
            [tp] = self.consumer.position([TopicPartition(self.topic, partition)])
        except Exception:  # noqa: BLE001 - not assigned (any more): nothing to wait for
            return False
        if tp.offset >= 0:
            return tp.offset < high
        queried = self._queried.get(partition)
        return self._start == OFFSET_BEGINNING and queried is not None and queried[0] < high

    def _query_watermarks(self, partitions: list[int]) -> None:
        """(low, high) of each newly assigned partition, asked of the broker now."""
        self._queried = {}
        # within one budget: this runs in the rebalance callback, which holds up the poll
        deadline = time.monotonic() + WATERMARK_QUERY_BUDGET_S
        for p in partitions:
            left = deadline - time.monotonic()
            if left <= 0:
                break  # the rest are known from their first fetch, as before
            try:
                self._queried[p] = self.consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=left, cached=False)
            except Exception:  # noqa: BLE001 - then the first fetch tells, as before
                continue

    def close(self) -> None:
        """Leave the group (idempotent). The rebalance callbacks that leaving triggers no
        longer reach the reader: it is going away (or gone, after a failure), and what it
        holds is dropped anyway."""
        if not self._closed:
            self._closed = True
            self._pause_watch.stop()
            self._on_revoke = lambda partitions, lost: None
            self.consumer.close()
