"""Owners of partitions in one process, without Kafka or an actor system.

An :class:`Owner` is the reader logic and its writers wired by a message queue, exactly as
the actors wire them, but pumped by the test: the test decides when records arrive, when
messages are delivered and when the timer ticks, so races can be staged precisely.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from garmexport.settings.config import Config
from garmexport.wire.events import EXPORTED
from garmexport.testbed.generator import Spec, generate
from garmexport.pipeline.messages import WriterMessage
from garmexport.observe.metrics import Metrics
from garmexport.protocol.backoff import Backoff
from garmexport.pipeline.origin_writer import OriginWriter
from garmexport.pipeline.coordinator import Coordinator
from garmexport.pipeline.writer_order import WriterOrder
from garmexport.storage.base import Storage


@dataclass(frozen=True)
class FakeRecord:
    """What the router reads of a confluent-kafka Message."""

    _offset: int
    _value: bytes | None
    _ts: int
    _key: bytes | None = None

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts)

    def key(self) -> bytes | None:
        return self._key


class FakePort:
    def __init__(self) -> None:
        self.seeks: list[tuple[int, int]] = []
        self.paused: set[int] = set()
        #: partitions whose records wait in the consumer's queue (see KafkaPort.behind)
        self.waiting: set[int] = set()

    def seek(self, partition: int, offset: int) -> None:
        self.seeks.append((partition, offset))

    def pause(self, partitions: list[int]) -> None:
        self.paused.update(partitions)

    def resume(self, partitions: list[int]) -> None:
        self.paused.difference_update(partitions)

    def behind(self, partition: int) -> bool:
        return partition in self.waiting


class Owner:
    _ids = itertools.count(1)

    def __init__(self, config: Config, storage: Storage, clock=None,  # noqa: ANN001
                 registrar=None, reports_together: bool = False) -> None:  # noqa: ANN001
        self.config, self.storage = config, storage
        #: hand the reports of a delivery round to the reader in one call, as the reader
        #: actor hands over what the writers made since it last looked (Coordinator.reports)
        self.reports_together = reports_together
        self.now = 0.0
        self.clock = clock or (lambda: self.now)
        self.port = FakePort()
        self.queue: deque[tuple[str, int, WriterMessage]] = deque()
        self.writers: dict[tuple[str, int], OriginWriter] = {}
        self.orders: dict[tuple[str, int], WriterOrder] = {}
        self.fenced = 0
        st = config.storage  # one back-off per store in a process, as exporter_parts wires it
        self.backoff = Backoff(st.retry_initial_s, st.retry_max_s)
        self.coordinator = Coordinator(config, f"owner{next(self._ids)}", storage,
                             Metrics.create(CollectorRegistry()), self._send, self.port,
                             clock=self.clock, wall_ms=lambda: int(self.now * 1000),
                             registrar=registrar)

    def _send(self, origin: str, partition: int, msg: WriterMessage) -> None:
        self.queue.append((origin, partition, msg))

    def deliver(self, limit: int | None = None) -> None:
        """Deliver queued messages (and the reports they cause) in order."""
        n = 0
        made = []
        while self.queue and (limit is None or n < limit):
            n += 1
            origin, p, msg = self.queue.popleft()
            w = self.writers.get((origin, p))
            if w is None:
                w = self.writers[(origin, p)] = OriginWriter(
                    self.config, self.storage, origin, p, self.clock, self.backoff)
                self.orders[(origin, p)] = WriterOrder()
            # the writer actor's order (each message is a job that ends at once here:
            # delivery is in order, one message at a time, so a DropOpen has nothing
            # waiting to void)
            order = self.orders[(origin, p)]
            order.take(msg)
            job = order.next_job()
            if job is None:
                continue
            [msg] = job.messages
            report = w.handle(msg)
            order.job_done()
            if report is not None:
                if report.fenced_path is not None:
                    self.fenced += 1
                if self.reports_together:
                    made.append(report)
                else:
                    self.coordinator.report(report)
            if made and not self.queue:  # the round is over: its reports may send more
                self.coordinator.reports(made)
                made = []
        if made:  # stopped at the limit
            self.coordinator.reports(made)

    def feed(self, partition: int, records: list[FakeRecord]) -> None:
        self.coordinator.records(partition, records)
        self.deliver()

    def tick(self, advance_s: float = 1.0) -> None:
        self.now += advance_s
        self.coordinator.tick()
        self.deliver()

    def finish(self) -> None:
        """Publish everything open and write final markers (a clean stop)."""
        self.coordinator.flush_all()
        self.deliver()
        self.coordinator.write_markers(self.clock(), force=True)


def every_type_by_partition(partitions: int, count: int) -> dict[int, list[FakeRecord]]:
    """``count`` generated records of every exported type (uniform mix) over 3 days, 20 %
    late, as each partition's records in offset order."""
    spec = Spec(now_ms=int(time.time() * 1000), partitions=partitions, days=3,
                late_share=0.2, mix={t.name: 1.0 for t in EXPORTED})
    by_partition: dict[int, list[FakeRecord]] = {p: [] for p in range(partitions)}
    for r in generate(spec, count):
        recs = by_partition[r.partition]
        recs.append(FakeRecord(len(recs), r.value, r.timestamp_ms))
    return by_partition
