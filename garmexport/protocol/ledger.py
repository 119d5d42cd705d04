"""The low watermark of each origin in one partition, kept by the partition reader.

W(origin) is the largest offset such that every event of that origin up to it is in a
published file. The reader knows which offsets it has routed; each writer reports, after
every message it handles, the first offset of its oldest open file and how far its input
reached. From those:

- a writer with batches still in flight (sent, not yet reported): W is at most what the
  writer last reported, because the in-flight events are not yet anywhere durable;
- a writer with open files: W = (first offset of its oldest open file) - 1;
- otherwise: W = the offset the reader has routed up to, since every event of the origin
  up to it has reached the writer and none is still open.

W never goes below what the resume state said at assignment, and never decreases.
Chains whose last published offset is above W are kept so that the next marker carries
them (DESIGN.md 4.5: a restart needs them to skip exactly).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from garmexport.protocol.resume import Chain, Marker, PartitionState, seek_after


@dataclass
class _Origin:
    low: int
    reported_upto: int
    open_first: int | None = None
    in_flight: int = 0


@dataclass
class PartitionLedger:
    """Mutable bookkeeping of one assigned partition; pure (no I/O, no clock)."""

    partition: int
    processed: int
    processed_kafka_ms: int | None = None
    _origins: dict[str, _Origin] = field(default_factory=dict)
    _last: dict[Chain, int] = field(default_factory=dict)
    _written_low: dict[str, int] = field(default_factory=dict)
    _written_last: dict[Chain, int] = field(default_factory=dict)

    @staticmethod
    def start(state: PartitionState, origins: Iterable[str], seek: int) -> PartitionLedger:
        """A ledger for a partition resumed at ``seek`` (the first offset to be read)."""
        ledger = PartitionLedger(state.partition, processed=seek - 1)
        for origin in origins:
            low = max(state.low_of(origin), seek - 1)
            ledger._origins[origin] = _Origin(low=low, reported_upto=seek - 1)
        ledger._last = dict(state.last)
        ledger._written_low = dict(state.low)
        ledger._written_last = dict(state.last)
        return ledger

    def _origin(self, origin: str) -> _Origin:
        """An origin's bookkeeping; :meth:`start` made one for every origin there is."""
        try:
            return self._origins[origin]
        except KeyError:
            raise KeyError(f"origin {origin!r} is not one this ledger was started with") from None

    def sent(self, origin: str) -> None:
        """A batch of ``origin``'s events left the reader."""
        self._origin(origin).in_flight += 1

    def routed_upto(self, offset: int, kafka_ms: int | None = None) -> None:
        """Every record of the partition up to ``offset`` has been routed (or skipped);
        ``kafka_ms`` is the Kafka timestamp of the record at ``offset``."""
        if offset > self.processed:
            self.processed = offset
            if kafka_ms is not None and kafka_ms >= 0:
                self.processed_kafka_ms = max(kafka_ms, self.processed_kafka_ms or kafka_ms)

    def reported(
        self,
        origin: str,
        *,
        handled: int,
        upto: int,
        open_first: int | None,
        published: Iterable[tuple[Chain, int]] = (),
    ) -> None:
        """A writer's report: it handled ``handled`` of our batches, its input reached
        ``upto``, its oldest open file starts at ``open_first``, and it published files
        whose chains end at the given offsets."""
        o = self._origin(origin)
        o.in_flight = max(0, o.in_flight - handled)
        o.reported_upto = max(o.reported_upto, upto)
        o.open_first = open_first
        for chain, last in published:
            self._last[chain] = max(last, self._last.get(chain, last))

    def low(self, origin: str) -> int:
        o = self._origin(origin)
        if o.open_first is not None:
            candidate = o.open_first - 1
        elif o.in_flight:
            candidate = o.reported_upto
        else:
            candidate = self.processed
        if o.in_flight:
            candidate = min(candidate, o.reported_upto)
        o.low = max(o.low, candidate)
        return o.low

    def lows(self) -> dict[str, int]:
        return {origin: self.low(origin) for origin in sorted(self._origins)}

    def seek_position(self) -> int:
        """Where a restart right now would resume: the seek position (DESIGN.md 4.5)."""
        lows = self.lows()
        return seek_after(lows) if lows else self.processed + 1

    def marker(self, written_at_ms: int) -> Marker:
        lows = self.lows()
        last = {c: o for c, o in self._last.items() if o > lows.get(c.origin, -1)}
        self._last = last
        return Marker(self.partition, lows, last, self.processed, written_at_ms,
                      self.processed_kafka_ms)

    def changed_since_written(self) -> bool:
        """Whether a new marker would say more than the last one written."""
        lows = self.lows()
        if any(lows.get(o, -1) > self._written_low.get(o, -1) for o in lows):
            return True
        return any(o > self._written_last.get(c, -1) and o > lows.get(c.origin, -1)
                   for c, o in self._last.items())

    def written(self, marker: Marker) -> None:
        self._written_low = dict(marker.low)
        self._written_last = dict(marker.last)

    def open_writers(self) -> list[str]:
        return [name for name, o in self._origins.items() if o.open_first is not None or o.in_flight]
