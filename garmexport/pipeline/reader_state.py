"""What the reader keeps per assigned partition, and its view of the Kafka consumer.

Read by the reader (:mod:`garmexport.pipeline.coordinator`) and the helpers that decide on its
state: the flushes (:mod:`~garmexport.pipeline.flusher`), the store watch
(:mod:`~garmexport.pipeline.store_watch`) and the gauges
(:mod:`~garmexport.pipeline.reader_gauges`). The rules live in those modules; the state
has one owner: an :class:`Assigned` (and the :class:`WriterStatus` in it) changes only
through its own methods, which the reader and the flusher call with what they decided.
Its ledger, marker keeper and position times are objects of their own, changed through
their own methods. The reader alone adds and removes partitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from garmexport.observe.lag_time import PositionTimes
from garmexport.protocol.ledger import PartitionLedger
from garmexport.protocol.marker_keeper import MarkerKeeper
from garmexport.protocol.naming import IntentName, MarkerName
from garmexport.protocol.resume import Chain, Marker, OriginState
from garmexport.pipeline.router import OriginBatch


class KafkaPort(Protocol):
    def seek(self, partition: int, offset: int) -> None: ...
    def pause(self, partitions: list[int]) -> None: ...
    def resume(self, partitions: list[int]) -> None: ...
    def behind(self, partition: int) -> bool:
        """Whether the last fetch showed records past what was consumed of the partition."""
        ...


@dataclass
class WriterStatus:
    """A writer as its last report showed it."""

    buffered_bytes: int = 0
    open_files: int = 0
    oldest_open_s: float | None = None
    store_failing: bool = False
    store_error: str = ""
    #: a FlushOpen was sent for the budget and no report came since
    flush_requested: bool = False

    def reported(self, buffered_bytes: int, open_files: int, oldest_open_s: float | None,
                 store_failing: bool, store_error: str) -> bool:
        """Take a report's facts; True if the store fails now or failed until now."""
        was_failing = self.store_failing
        self.buffered_bytes, self.open_files = buffered_bytes, open_files
        self.oldest_open_s = oldest_open_s
        self.flush_requested = False
        self.store_failing, self.store_error = store_failing, store_error
        return was_failing or store_failing

    def request_flush(self) -> None:
        self.flush_requested = True


@dataclass
class Assigned:
    epoch: int
    ledger: PartitionLedger
    keeper: MarkerKeeper
    #: Kafka times of offsets, for the lag in seconds (lag_time)
    times: PositionTimes
    writers: dict[str, WriterStatus] = field(default_factory=dict)
    reset_sent: set[str] = field(default_factory=set)
    #: routed records not yet sent, per origin, with the time the first one arrived
    pending: dict[str, tuple[OriginBatch, float]] = field(default_factory=dict)
    last_record_s: float = 0.0
    #: records routed since the last idle flush: only a burst (a catch-up) ends in one
    burst: int = 0
    #: per origin, the resume state at the assignment: what routing skips by, and what
    #: its writer's reset starts from (it does not change within an assignment)
    states: dict[str, OriginState] = field(default_factory=dict)

    def took_records(self, count: int, now: float, first: tuple[int, int],
                     last: tuple[int, int]) -> None:
        """A poll brought ``count`` records at ``now``; ``first`` and ``last`` are the
        (offset, Kafka time ms) of its first and last record, for the lag in seconds."""
        self.last_record_s = now
        self.burst += count
        for offset, ts_ms in (first, last):
            self.times.seen(offset, ts_ms)

    def first_run(self) -> bool:
        """Nothing of the partition was ever processed here or recorded in a marker."""
        return self.ledger.processed < 0 and not self.keeper.markers

    def files_reported(self, origin: str, handled: int, upto: int, open_first: int | None,
                       published: list[tuple[Chain, int]],
                       intents: list[IntentName]) -> None:
        """A writer report of the current epoch: W moves (the ledger), and the intents of
        the files it published may go once a marker covers them (the keeper)."""
        self.ledger.reported(origin, handled=handled, upto=upto, open_first=open_first,
                             published=published)
        for intent in intents:
            self.keeper.published(intent)

    def marker_written(self, name: MarkerName, marker: Marker,
                       now: float) -> tuple[list[MarkerName], list[IntentName]]:
        """``marker`` is on the store as ``name``: the markers it makes redundant and the
        intents it covers, to delete (then :meth:`garbage_deleted`)."""
        self.ledger.written(marker)
        return self.keeper.written(name, marker, now)

    def garbage_deleted(self, markers: list[MarkerName], intents: list[IntentName]) -> None:
        self.keeper.deleted(markers, intents)

    def hold(self, origin: str, batch: OriginBatch, now: float) -> None:
        """Gather routed records of ``origin`` until they leave for its writer; the first
        held since the last left counts as in flight for W (the ledger waits for it)."""
        held = self.pending.get(origin)
        if held is None:
            self.ledger.sent(origin)
            self.pending[origin] = (batch, now)
        else:
            held[0].extend(batch)

    def release(self, origin: str) -> OriginBatch:
        """The records gathered for ``origin``, which leave for its writer now."""
        batch, _ = self.pending.pop(origin)
        return batch

    def writer_started(self, origin: str) -> bool:
        """Note that ``origin``'s writer is reset in this epoch; False if it already was."""
        if origin in self.reset_sent:
            return False
        self.reset_sent.add(origin)
        self.writers[origin] = WriterStatus()
        return True

    def writer_reported(self, origin: str, buffered_bytes: int, open_files: int,
                        oldest_open_s: float | None, store_failing: bool,
                        store_error: str) -> bool:
        """A report of ``origin``'s writer (:meth:`WriterStatus.reported`)."""
        view = self.writers.setdefault(origin, WriterStatus())
        return view.reported(buffered_bytes, open_files, oldest_open_s, store_failing,
                             store_error)

    def burst_ended(self) -> None:
        self.burst = 0
