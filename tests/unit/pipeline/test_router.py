"""Routing a poll over whole columns gives exactly what the per-record reference gives."""

from __future__ import annotations

import struct
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.pipeline import router
from garmexport.wire.events import REGISTRY
from garmexport.pipeline.router import ORIGINS, Window, route, route_each
from garmexport.protocol.resume import OriginState
from tests import strategies as gs
from tests.hypothesis_profiles import examples
from tests.pipeline.harness import FakeRecord

DAY = 86_400_000
markers = st.sampled_from(sorted(REGISTRY))  # exported ones and the two that are not
windows = st.builds(Window, past_ms=st.sampled_from([DAY, 30 * DAY]),
                    future_ms=st.sampled_from([0, 3_600_000]), clamp=st.booleans())


@st.composite
def good_frames(draw: st.DrawFn, kafka_ms: int) -> bytes:
    """A frame whose head adds up (payload bytes need not parse: routing reads no protobuf),
    with an event time near its Kafka timestamp: inside the window, at its edges, or past."""
    header, body = draw(st.binary(max_size=40)), draw(st.binary(max_size=80))
    stamp = kafka_ms + draw(st.sampled_from([0, -DAY, -30 * DAY, -30 * DAY - 1, 3_600_000,
                                             3_600_001, -5 * DAY + 7, 2 * DAY]))
    return struct.pack(">iqii", draw(markers), stamp, len(header), len(body)) + header + body


@st.composite
def polls(draw: st.DrawFn, malformed: bool, one_in: int = 5, size: int = 40) -> list[FakeRecord]:
    """Up to ``size`` records; with ``malformed``, about one in ``one_in`` is not a frame."""
    records, offset = [], draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, size))):
        kafka_ms = draw(st.sampled_from([-1, 0, 1_795_300_000_000, 1_795_300_000_000 + 3 * DAY]))
        if malformed and draw(st.integers(1, one_in)) == 1:
            value = draw(gs.malformed_frames(heads_only=True))[0]
        else:
            value = draw(good_frames(kafka_ms))
        records.append(FakeRecord(offset, value, kafka_ms, b"k%d" % offset))
        offset += draw(st.integers(1, 3))  # gaps: compacted or transactional offsets
    return records


def lows_for(records: list[FakeRecord]) -> st.SearchStrategy[dict[str, OriginState]]:
    """Resume states per origin: W anywhere around the poll (the router skips by W)."""
    first, last = records[0].offset(), records[-1].offset()
    return st.dictionaries(st.sampled_from(ORIGINS),
                           st.integers(first - 2, last + 1).map(lambda w: OriginState(w, {})),
                           max_size=6)


def same(a: router.RoutedPoll, b: router.RoutedPoll) -> None:
    assert list(a.batches) == list(b.batches)  # origins in order of their first record
    assert a == b
    for batch in (*a.batches.values(), *b.batches.values()):  # the form the writer decodes
        assert {c.dtype for c in (batch.offsets, batch.kafka_ts, batch.days)} == {np.dtype(np.int64)}


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data(), window=windows)
def test_a_poll_of_frames_is_routed_over_columns_like_record_by_record(data, window):
    records = data.draw(polls(malformed=False))
    lows = data.draw(lows_for(records))
    columns = router._route_columns(records, lows, window)
    assert columns is not None  # event times outside an unclamped window included
    same(columns, route_each(records, lows, window))


def one_by_one(records: list[FakeRecord], window: Window) -> int:
    """How many records the rules quarantine, committed or not (not frames, event times
    outside an unclamped window): those the column path hands to ``classify``."""
    return sum(router.classify(r.value(), r.timestamp()[1], window)[2] is not None for r in records)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data(), window=windows, one_in=st.sampled_from([2, 5, 50]))
def test_a_poll_with_records_that_are_not_frames_is_routed_over_columns(data, window, one_in):
    """Not frames (None, empty, short, lengths, unknown markers), event times outside the
    window, committed records, clamped or not: the columns give the reference's result,
    and the rules of one record run only for the records they quarantine."""
    records = data.draw(polls(malformed=True, one_in=one_in, size=80))
    lows = data.draw(lows_for(records))
    reference = route_each(records, lows, window)
    expected_calls = one_by_one(records, window)
    with mock.patch.object(router, "classify", wraps=router.classify) as classify:
        columns = router._route_columns(records, lows, window)
    assert columns is not None
    same(columns, reference)
    assert classify.call_count == expected_calls


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data(), window=windows)
def test_any_poll_is_routed_like_record_by_record(data, window):
    records = data.draw(polls(malformed=True))
    lows = data.draw(lows_for(records))
    same(route(records, lows, window), route_each(records, lows, window))


def test_a_clean_poll_takes_the_column_path():
    frame = struct.pack(">iqii", 1, 1_795_300_000_000, 1, 1) + b"hb"
    records = [FakeRecord(i, frame, 1_795_300_000_000) for i in range(3)]
    routed = router._route_columns(records, {}, Window(DAY, 0))
    assert routed is not None and routed.batches["fs"].offsets.tolist() == [0, 1, 2]


def test_only_the_exceptional_records_of_a_poll_go_one_by_one():
    kafka_ms = 1_795_300_000_000
    fs = struct.pack(">iqii", 1, kafka_ms, 1, 1) + b"hb"
    late = struct.pack(">iqii", 1, kafka_ms - 2 * DAY, 1, 1) + b"hb"  # outside a day back
    odd = {7: None, 50: b"", 51: fs[:12], 90: fs + b"x", 120: b"\x00\x00\x03\xe7" + fs[4:],
           150: late, 199: None}
    records = [FakeRecord(i, odd.get(i, fs), kafka_ms, b"k%d" % i) for i in range(200)]
    window = Window(DAY, 0)
    with mock.patch.object(router, "classify", wraps=router.classify) as classify:
        routed = route(records, {"_frame": OriginState(7, {})}, window)
    assert classify.call_count == len(odd)
    assert routed == route_each(records, {"_frame": OriginState(7, {})}, window)
    assert routed.skipped_committed == 1 and routed.quarantined == {
        "empty_value": 1, "short_head": 1, "length_mismatch": 1, "unknown_marker": 1,
        "timestamp_out_of_window": 1, "null_value": 1}
    assert [i for i, *_ in routed.batches["_frame"].bad] == [0, 1, 2, 3, 4]
    assert routed.batches["fs"].bad[0][:2] == (150 - 5, "timestamp_out_of_window")


def test_bounds_that_would_overflow_int64_go_record_by_record():
    frame = struct.pack(">iqii", 1, 5, 0, 0)
    records = [FakeRecord(0, frame, 2**62)]
    window = Window(2**62, 2**62)
    assert router._route_columns(records, {}, window) is None
    assert route(records, {}, window) == route_each(records, {}, window)


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data(), window=windows)
def test_batches_of_two_polls_extended_are_the_batches_of_one_poll(data, window):
    """The reader gathers an origin's records over polls (OriginBatch.extend): the same
    columns, bad records renumbered, as if one poll had brought them all."""
    records = data.draw(polls(malformed=True))
    cut = data.draw(st.integers(0, len(records)))
    whole = route(records, {}, window)
    gathered: dict[str, router.OriginBatch] = {}
    for part in (records[:cut], records[cut:]):
        for origin, batch in route(part, {}, window).batches.items():
            if origin in gathered:
                gathered[origin].extend(batch)
            else:
                gathered[origin] = batch
    assert gathered == whole.batches
    assert all(b.days.dtype == np.int64 for b in gathered.values())
