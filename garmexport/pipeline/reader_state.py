"""What the reader keeps per assigned partition, and its view of the Kafka consumer.

Shared by the reader (:mod:`garmexport.pipeline.reader`) and the helpers that act on its
state: the flushes (:mod:`~garmexport.pipeline.flusher`), the store watch
(:mod:`~garmexport.pipeline.store_watch`) and the gauges
(:mod:`~garmexport.pipeline.reader_gauges`). Data only: the rules live in those modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from garmexport.observe.lag_time import PositionTimes
from garmexport.protocol.ledger import PartitionLedger
from garmexport.protocol.marker_keeper import MarkerKeeper
from garmexport.pipeline.router import OriginBatch


class KafkaPort(Protocol):
    def seek(self, partition: int, offset: int) -> None: ...
    def pause(self, partitions: list[int]) -> None: ...
    def resume(self, partitions: list[int]) -> None: ...
    def behind(self, partition: int) -> bool:
        """Whether the last fetch showed records past what was consumed of the partition."""
        ...


@dataclass
class WriterView:
    buffered_bytes: int = 0
    open_files: int = 0
    oldest_open_s: float | None = None
    store_failing: bool = False
    store_error: str = ""
    flush_requested: bool = False


@dataclass
class Assigned:
    epoch: int
    ledger: PartitionLedger
    lows: dict[str, int]
    keeper: MarkerKeeper
    #: Kafka times of offsets, for the lag in seconds (lag_time)
    times: PositionTimes
    writers: dict[str, WriterView] = field(default_factory=dict)
    reset_sent: set[str] = field(default_factory=set)
    #: routed records not yet sent, per origin, with the time the first one arrived
    pending: dict[str, tuple[OriginBatch, float]] = field(default_factory=dict)
    last_record_s: float = 0.0
    #: records routed since the last idle flush: only a burst (a catch-up) ends in one
    burst: int = 0
    state_last: dict[str, tuple[tuple[str, str, int], ...]] = field(default_factory=dict)
