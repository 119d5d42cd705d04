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
- Records at or below their origin's W at assignment are skipped: they are published. This
  is the first half of the one skip rule (:meth:`OriginState.skip_bound`), the half that
  holds for every chain of the origin; the writer applies the whole rule after decoding.

Records are duck-typed (``value()``, ``offset()``, ``timestamp()``, ``key()``), as
confluent-kafka's Message is, so this module stays free of Kafka imports; the records of
one poll are all of one class.

A poll is routed over whole columns: the values' lengths and first 20 bytes are read as
arrays (numpy), and each origin's records picked by index, with no Python step per record
beyond fetching its value, offset and timestamp. The few records that the rules treat one
by one (not a frame, an unknown marker, an event time outside an unclamped window) are
found by a mask and go through :func:`classify`, the rules of one record, which the
per-record reference :func:`route_each` applies to every record; their origins, days and
reasons are merged into the columns before the batches are cut. Tests hold both paths to
the same result.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter, length_hint
from typing import Protocol

import numpy as np

from garmexport.pipeline.crash_points import predated_types
from garmexport.wire.events import REGISTRY
from garmexport.wire.frame_arrays import HEAD_DTYPE
from garmexport.wire.frames import HEAD_SIZE, DecodeFailure, Reason, read_head, unknown_marker
from garmexport.protocol.naming import FRAME_ORIGIN, MS_PER_DAY, day_number_of_ms, quarantine_day
from garmexport.protocol.resume import OriginState
from garmexport.settings.config import ProtocolConfig

#: marker -> origin (output name); "" for known types that are not exported
ORIGIN_OF_MARKER: Mapping[int, str] = {m: (t.output or "") for m, t in REGISTRY.items()}
ORIGINS: tuple[str, ...] = tuple(sorted({o for o in ORIGIN_OF_MARKER.values() if o})) + (FRAME_ORIGIN,)


def exported_origins() -> tuple[str, ...]:
    """The origins that are event types (dataset directories), ``_frame`` left out."""
    return tuple(o for o in ORIGINS if o != FRAME_ORIGIN)
_NOT_EXPORTED, _UNKNOWN = -1, -2
#: TEST ONLY: markers read as unknown (:func:`garmexport.pipeline.crash_points.predated_types`)
_PREDATED = frozenset(m for m, o in ORIGIN_OF_MARKER.items() if o and o in predated_types())
#: marker -> index in ORIGINS, _NOT_EXPORTED, or _UNKNOWN (for the column path)
_CODE_OF_MARKER = np.full(max(ORIGIN_OF_MARKER) + 1, _UNKNOWN, np.int64)
for _marker, _origin in ORIGIN_OF_MARKER.items():
    _CODE_OF_MARKER[_marker] = (_UNKNOWN if _marker in _PREDATED else
                                ORIGINS.index(_origin) if _origin else _NOT_EXPORTED)
_CODE_OF_ORIGIN: Mapping[str, int] = {o: i for i, o in enumerate(ORIGINS)} | {"": _NOT_EXPORTED}
_HEAD_BYTES = np.dtype(f"S{HEAD_SIZE}")
_OUT_OF_WINDOW = Reason.TIMESTAMP_OUT_OF_WINDOW.value
_kafka_ms = itemgetter(1)  # of a record's (timestamp type, timestamp)
_first = itemgetter(0)


@dataclass(frozen=True)
class Window:
    """Event times accepted around a record's Kafka timestamp, in milliseconds."""

    past_ms: int
    future_ms: int
    clamp: bool = False

    @staticmethod
    def of(protocol: ProtocolConfig) -> Window:
        """The window the configuration sets (``protocol.event_time_*``, ``out_of_window``):
        the exporter's, and ``repair``'s, which must route every record as it does."""
        return Window(int(protocol.event_time_past_days * MS_PER_DAY),
                      int(protocol.event_time_future_s * 1000),
                      clamp=protocol.out_of_window == "clamp")


def _no_ints() -> np.ndarray:
    return np.empty(0, np.int64)


@dataclass(eq=False)
class OriginBatch:
    """Columns of one origin's records from one poll, in offset order.

    Offsets, Kafka timestamps and days are int64 arrays, as the router computes them, and
    stay so up to the decoder (``pipeline.messages.Batch`` carries them as they are):
    a column of 8,192 Python ints costs about 0.3 ms each way, per batch and per form.
    """

    offsets: np.ndarray = field(default_factory=_no_ints)
    values: list[bytes | None] = field(default_factory=list)
    kafka_ts: np.ndarray = field(default_factory=_no_ints)
    days: np.ndarray = field(default_factory=_no_ints)
    #: (index in this batch, reason, detail, key) of records known bad before decoding
    bad: list[tuple[int, str, str, bytes | None]] = field(default_factory=list)
    #: bytes of the values: what the batch holds in memory, for the memory budget
    nbytes: int = 0

    def extend(self, more: OriginBatch) -> None:
        """Append ``more`` (later offsets of the same origin)."""
        base = len(self.offsets)
        self.offsets = np.concatenate((self.offsets, more.offsets))
        self.values.extend(more.values)
        self.kafka_ts = np.concatenate((self.kafka_ts, more.kafka_ts))
        self.days = np.concatenate((self.days, more.days))
        self.nbytes += more.nbytes
        self.bad.extend((base + i, reason, detail, key) for i, reason, detail, key in more.bad)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OriginBatch):
            return NotImplemented
        return (self.values == other.values and self.bad == other.bad
                and self.nbytes == other.nbytes
                and all(np.array_equal(a, b) for a, b in ((self.offsets, other.offsets),
                                                           (self.kafka_ts, other.kafka_ts),
                                                           (self.days, other.days))))


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


def route(records: Sequence[KafkaRecord], states: Mapping[str, OriginState],
          window: Window) -> RoutedPoll:
    """Route records of ONE partition, in offset order, skipping those at or below their
    origin's W (``states``: the resume state per origin; an origin not in it skips nothing)."""
    routed = _route_columns(records, states, window) if records else None
    return routed if routed is not None else route_each(records, states, window)


def _low(states: Mapping[str, OriginState], origin: str) -> int:
    state = states.get(origin)
    return -1 if state is None else state.low


def classify(value: bytes | None, kafka_ms: int, window: Window) -> tuple[str, int, str | None, str]:
    """One record by the rules above: (origin, UTC day, quarantine reason or None, its
    detail). The origin is "" for a known type that is not exported (its day means nothing)."""
    head = read_head(value)
    if _PREDATED and not isinstance(head, DecodeFailure) and head[0] in _PREDATED:
        head = unknown_marker(head[0])
    if isinstance(head, DecodeFailure):
        return FRAME_ORIGIN, quarantine_day(kafka_ms), head.reason.value, head.detail
    origin, ts = ORIGIN_OF_MARKER[head[0]], head[1]
    if not origin:
        return origin, 0, None, ""
    low, high = kafka_ms - window.past_ms, kafka_ms + window.future_ms
    if kafka_ms >= 0 and not low <= ts <= high:
        if not window.clamp:
            return (origin, quarantine_day(kafka_ms), _OUT_OF_WINDOW,
                    f"event time {ts} ms outside [{low}, {high}]")
        ts = min(max(ts, low), high)
    return origin, day_number_of_ms(ts), None, ""


def route_each(records: Iterable[KafkaRecord], states: Mapping[str, OriginState],
               window: Window) -> RoutedPoll:
    """:func:`route`, one record at a time: the reference, and the path of polls whose
    window bounds would overflow int64."""
    out = RoutedPoll()
    batches = out.batches
    # per origin: its batch, its low, and the bound appends of its columns
    sinks: dict[str, tuple] = {}
    skipped = 0
    last = -1
    for rec in records:
        value = rec.value()
        offset = rec.offset()
        kts = rec.timestamp()[1]
        last = offset
        origin, day, reason, detail = classify(value, kts, window)
        if not origin:
            out.not_exported += 1
            continue
        sink = sinks.get(origin)
        if sink is None:
            b = batches[origin] = OriginBatch()
            sink = sinks[origin] = (b, _low(states, origin), [], b.values.append, [], [])
        if offset <= sink[1]:
            skipped += 1
            continue
        if reason is not None:
            b = sink[0]
            b.bad.append((len(b.values), reason, detail, rec.key()))
            out.quarantined[reason] = out.quarantined.get(reason, 0) + 1
        sink[2].append(offset)
        sink[3](value)
        sink[4].append(kts)
        sink[5].append(day)
    for origin, (b, _, offsets, _, kafka_ts, days) in sinks.items():
        if not offsets:
            del batches[origin]  # every record of the origin was already committed
            continue
        b.offsets, b.kafka_ts, b.days = (np.array(c, np.int64) for c in (offsets, kafka_ts, days))
        b.nbytes = sum(map(len, filter(None, b.values)))
    out.skipped_committed = skipped
    out.last_offset = last
    out.records = sum(len(b.offsets) for b in batches.values()) + skipped + out.not_exported
    return out


def _route_columns(records: Sequence[KafkaRecord], states: Mapping[str, OriginState],
                   window: Window) -> RoutedPoll | None:
    """:func:`route_each`'s result over whole columns, the exceptional records through
    :func:`classify`; None if the window's bounds would overflow int64."""
    n = len(records)
    kind = type(records[0])
    values = list(map(kind.value, records))
    offsets = np.fromiter(map(kind.offset, records), np.int64, n)
    kafka_ts = np.fromiter(map(_kafka_ms, map(kind.timestamp, records)), np.int64, n)
    widest = max(int(kafka_ts.max()), -int(kafka_ts.min())) + max(abs(window.past_ms),
                                                                  abs(window.future_ms))
    if widest >= 2**63:
        return None  # the window's bounds would overflow int64 (Python's ints do not)
    # every value's length (a None's is 0) and its first HEAD_SIZE bytes, zero-padded: the
    # head of a shorter value (numpy stores a None as b"None") is never used, as these
    # values go one by one
    lengths = np.fromiter(map(length_hint, values), np.int64, n)
    heads = np.array(values, _HEAD_BYTES).view(HEAD_DTYPE)
    long = lengths >= HEAD_SIZE
    markers = heads["marker"].astype(np.int64)
    known = (markers >= 0) & (markers < len(_CODE_OF_MARKER))
    codes = _CODE_OF_MARKER[np.where(known, markers, 0)]
    header_lens, body_lens = heads["header"].astype(np.int64), heads["body"].astype(np.int64)
    exceptional = ~(long & known & (codes != _UNKNOWN) & (header_lens >= 0) & (body_lens >= 0)
                    & (HEAD_SIZE + header_lens + body_lens == lengths))
    stamps = heads["timestamp"].astype(np.int64)
    low, high = kafka_ts - window.past_ms, kafka_ts + window.future_ms
    outside = ~exceptional & (codes >= 0) & (kafka_ts >= 0) & ((stamps < low) | (stamps > high))
    if window.clamp:
        stamps = np.minimum(np.maximum(stamps, low), high, out=stamps, where=outside)
    else:
        exceptional |= outside
    days = day_number_of_ms(stamps)  # element-wise on the int64 column
    # the records the rules take one by one, in offset order: their origins and days go
    # into the columns, their reasons (if not committed) aside, by origin
    out = RoutedPoll(last_offset=int(offsets[-1]), records=n)
    code_lows = np.array([_low(states, o) for o in ORIGINS], np.int64)
    bad: dict[int, list[tuple[int, str, str]]] = {}  # code -> (record, reason, detail)
    for i in np.flatnonzero(exceptional).tolist():
        origin, day, reason, detail = classify(values[i], int(kafka_ts[i]), window)
        code = codes[i] = _CODE_OF_ORIGIN[origin]
        days[i] = day
        if reason is not None and offsets[i] > code_lows[code]:
            out.quarantined[reason] = out.quarantined.get(reason, 0) + 1
            bad.setdefault(code, []).append((i, reason, detail))
    # each origin's records, the origins in order of their first record (committed or not)
    exported = codes >= 0
    out.not_exported = n - int(np.count_nonzero(exported))
    present = np.flatnonzero(np.bincount(codes[exported], minlength=len(ORIGINS))).tolist()
    for picked in sorted((np.flatnonzero(codes == code) for code in present), key=_first):
        code = int(codes[picked[0]])
        above = offsets[picked] > code_lows[code]
        if not above.all():
            out.skipped_committed += int(picked.size - np.count_nonzero(above))
            picked = picked[above]
            if not picked.size:
                continue  # every record of the origin was already committed
        at = picked.tolist()
        batch = out.batches[ORIGINS[code]] = OriginBatch(
            offsets=offsets[picked],
            values=list(itemgetter(*at)(values)) if len(at) > 1 else [values[at[0]]],
            kafka_ts=kafka_ts[picked], days=days[picked],
            nbytes=int(lengths[picked].sum()))
        for i, reason, detail in bad.get(code, ()):
            batch.bad.append((bisect_left(at, i), reason, detail, records[i].key()))
    return out
