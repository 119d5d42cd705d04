"""Routing one poll's records to the writers of their origins (the reader's hot path).

Per record, and only this: read the 20-byte frame head, check that the lengths add up and
that the marker is known, decide the chain's day, and append to the batch of the record's
origin. No protobuf is parsed here; writers decode whole batches at once.

- A record whose head is unusable goes to the ``_frame`` origin, quarantined with its
  reason, on the UTC day of its Kafka timestamp.
- A known but not exported type (markers 0 and 3) is counted and dropped: it is processed.
- An event time outside the window around the record's Kafka timestamp is quarantined
  (on the Kafka day) or clamped into the window, by configuration. The window is relative
  to the Kafka timestamp, not to the wall clock, so a replay classifies every record the
  same way and no chain's content depends on when it was processed.
- Records at or below their origin's W at assignment are skipped: they are published.

Records are duck-typed (``value()``, ``offset()``, ``timestamp()``, ``key()``), as
confluent-kafka's Message is, so this module stays free of Kafka imports; the records of
one poll are all of one class.

A poll of good frames (the usual case) is routed over whole columns: the values are joined
once, their heads read as arrays (numpy), and each origin's records picked by index, with
no Python step per record beyond fetching its value, offset and timestamp. A poll with any
record that the rules above treat one by one (not a frame, an unknown marker, an event
time outside the window that is not clamped) takes the per-record path, which is the
reference: tests hold both to the same result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Protocol

import numpy as np

from garmexport.wire.events import REGISTRY
from garmexport.wire.frame_arrays import read_heads
from garmexport.wire.frames import HEAD, HEAD_SIZE, Reason, read_head
from garmexport.protocol.naming import FRAME_ORIGIN, MS_PER_DAY

#: marker -> origin (output name); "" for known types that are not exported
ORIGIN_OF_MARKER: Mapping[int, str] = {m: (t.output or "") for m, t in REGISTRY.items()}
ORIGINS: tuple[str, ...] = tuple(sorted({o for o in ORIGIN_OF_MARKER.values() if o})) + (FRAME_ORIGIN,)
_NOT_EXPORTED, _UNKNOWN = -1, -2
#: marker -> index in ORIGINS, _NOT_EXPORTED, or _UNKNOWN (for the column path)
_CODE_OF_MARKER = np.full(max(ORIGIN_OF_MARKER) + 1, _UNKNOWN, np.int64)
for _marker, _origin in ORIGIN_OF_MARKER.items():
    _CODE_OF_MARKER[_marker] = ORIGINS.index(_origin) if _origin else _NOT_EXPORTED
_kafka_ms = itemgetter(1)  # of a record's (timestamp type, timestamp)


@dataclass(frozen=True)
class Window:
    """Event times accepted around a record's Kafka timestamp, in milliseconds."""

    past_ms: int
    future_ms: int
    clamp: bool = False


@dataclass
class OriginBatch:
    """Columns of one origin's records from one poll, in offset order."""

    offsets: list[int] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    kafka_ts: list[int] = field(default_factory=list)
    days: list[int] = field(default_factory=list)
    #: (index in this batch, reason, detail, key) of records known bad before decoding
    bad: list[tuple[int, str, str, bytes | None]] = field(default_factory=list)
    #: bytes of the values: what the batch holds in memory, for the memory budget
    nbytes: int = 0

    def extend(self, more: OriginBatch) -> None:
        """Append ``more`` (later offsets of the same origin)."""
        base = len(self.offsets)
        self.offsets.extend(more.offsets)
        self.values.extend(more.values)
        self.kafka_ts.extend(more.kafka_ts)
        self.days.extend(more.days)
        self.nbytes += more.nbytes
        self.bad.extend((base + i, reason, detail, key) for i, reason, detail, key in more.bad)


@dataclass
class RoutedPoll:
    batches: dict[str, OriginBatch] = field(default_factory=dict)
    last_offset: int = -1
    records: int = 0
    skipped_committed: int = 0
    not_exported: int = 0
    quarantined: dict[str, int] = field(default_factory=dict)


class KafkaRecord(Protocol):
    """What the exporter reads of a consumed record (a confluent_kafka ``Message``)."""

    def value(self) -> bytes | None: ...
    def offset(self) -> int: ...
    def timestamp(self) -> tuple[int, int]: ...
    def key(self) -> bytes | None: ...


def route(records: Sequence[KafkaRecord], lows: Mapping[str, int], window: Window) -> RoutedPoll:
    """Route records of ONE partition, in offset order, skipping those at or below ``lows``."""
    routed = _route_columns(records, lows, window) if records else None
    return routed if routed is not None else route_each(records, lows, window)


def _route_columns(records: Sequence[KafkaRecord], lows: Mapping[str, int],
                   window: Window) -> RoutedPoll | None:
    """:func:`route_each`'s result over whole columns, or None if a record needs its rules
    one by one (not a frame, unknown marker, event time outside an unclamped window)."""
    n = len(records)
    kind = type(records[0])
    values = list(map(kind.value, records))
    if None in values:
        return None
    lengths = np.fromiter(map(len, values), np.int64, n)
    if int(lengths.min()) < HEAD_SIZE:
        return None
    starts = np.cumsum(lengths) - lengths
    heads = read_heads(np.frombuffer(b"".join(values), np.uint8), starts)
    markers = heads["marker"].astype(np.int64)
    known = (markers >= 0) & (markers < len(_CODE_OF_MARKER))
    codes = np.where(known, _CODE_OF_MARKER[np.where(known, markers, 0)], _UNKNOWN)
    header_lens, body_lens = heads["header"].astype(np.int64), heads["body"].astype(np.int64)
    if not ((codes != _UNKNOWN) & (header_lens >= 0) & (body_lens >= 0)
            & (HEAD_SIZE + header_lens + body_lens == lengths)).all():
        return None
    offsets = np.fromiter(map(kind.offset, records), np.int64, n)
    kafka_ts = np.fromiter(map(_kafka_ms, map(kind.timestamp, records)),
                           np.int64, n)
    widest = max(int(kafka_ts.max()), -int(kafka_ts.min())) + max(window.past_ms, window.future_ms)
    if widest >= 2**63:
        return None  # the window's bounds would overflow int64 (Python's ints do not)
    stamps = heads["timestamp"].astype(np.int64)
    exported = codes >= 0
    lo, hi = kafka_ts - window.past_ms, kafka_ts + window.future_ms
    outside = exported & (kafka_ts >= 0) & ((stamps < lo) | (stamps > hi))
    if outside.any():
        if not window.clamp:
            return None
        stamps = np.where(outside, np.minimum(np.maximum(stamps, lo), hi), stamps)
    days = stamps // MS_PER_DAY
    out = RoutedPoll(last_offset=int(offsets[-1]), records=n,
                     not_exported=int(np.count_nonzero(codes == _NOT_EXPORTED)))
    present, first_at = np.unique(codes[exported], return_index=True)
    for code in present[np.argsort(first_at)]:  # origins in order of first record
        origin = ORIGINS[code]
        picked = np.flatnonzero(codes == code)
        above = offsets[picked] > lows.get(origin, -1)
        if not above.all():
            out.skipped_committed += int(picked.size - np.count_nonzero(above))
            picked = picked[above]
            if not picked.size:
                continue  # every record of the origin was already committed
        at = picked.tolist()
        pick = itemgetter(*at) if len(at) > 1 else (lambda seq, i=at[0]: (seq[i],))
        out.batches[origin] = OriginBatch(
            offsets=offsets[picked].tolist(), values=list(pick(values)),
            kafka_ts=kafka_ts[picked].tolist(), days=days[picked].tolist(),
            nbytes=int(lengths[picked].sum()))
    return out


def route_each(records: Iterable[KafkaRecord], lows: Mapping[str, int], window: Window) -> RoutedPoll:
    """:func:`route`, one record at a time: the reference, and the path of polls with
    records that are not frames or fall outside the window."""
    out = RoutedPoll()
    batches = out.batches
    unpack = HEAD.unpack_from
    origin_of = ORIGIN_OF_MARKER.get
    past, future, clamp = window.past_ms, window.future_ms, window.clamp
    # per origin: its batch, its low, and the bound appends of its columns
    sinks: dict[str, tuple] = {}
    skipped = 0
    last = -1
    for rec in records:
        value = rec.value()
        offset = rec.offset()
        kts = rec.timestamp()[1]
        last = offset
        reason = None
        size = len(value) if value is not None else -1
        if size >= HEAD_SIZE:
            marker, ts, hlen, blen = unpack(value)
            origin = origin_of(marker) if HEAD_SIZE + hlen + blen == size and hlen >= 0 and blen >= 0 else None
        else:
            origin = None
        if origin is None:
            failure = read_head(value)  # the slow path says exactly why
            reason, detail = failure.reason.value, failure.detail  # type: ignore[union-attr]
            origin, day = FRAME_ORIGIN, max(kts, 0) // MS_PER_DAY
        elif not origin:
            out.not_exported += 1
            continue
        else:
            if kts >= 0 and not (kts - past <= ts <= kts + future):
                if clamp:
                    ts = min(max(ts, kts - past), kts + future)
                else:
                    reason = Reason.TIMESTAMP_OUT_OF_WINDOW.value
                    detail = f"event time {ts} ms outside [{kts - past}, {kts + future}]"
                    ts = kts
            day = ts // MS_PER_DAY
        sink = sinks.get(origin)
        if sink is None:
            b = batches[origin] = OriginBatch()
            sink = sinks[origin] = (b, lows.get(origin, -1), b.offsets.append, b.values.append,
                                    b.kafka_ts.append, b.days.append)
        if offset <= sink[1]:
            skipped += 1
            continue
        if reason is not None:
            b = sink[0]
            b.bad.append((len(b.offsets), reason, detail, rec.key()))
            out.quarantined[reason] = out.quarantined.get(reason, 0) + 1
        sink[2](offset)
        sink[3](value)
        sink[4](kts)
        sink[5](day)
    for origin in [o for o, b in batches.items() if not b.offsets]:
        del batches[origin]  # every record of the origin was already committed
    for b in batches.values():
        b.nbytes = sum(map(len, filter(None, b.values)))
    out.skipped_committed = skipped
    out.last_offset = last
    out.records = sum(len(b.offsets) for b in batches.values()) + skipped + out.not_exported
    return out
