"""Routing a poll over whole columns gives exactly what the per-record reference gives."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.pipeline import router
from garmexport.wire.events import REGISTRY
from garmexport.pipeline.router import ORIGINS, Window, route, route_each
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
def polls(draw: st.DrawFn, malformed: bool) -> list[FakeRecord]:
    records, offset = [], draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 40))):
        kafka_ms = draw(st.sampled_from([-1, 0, 1_795_300_000_000, 1_795_300_000_000 + 3 * DAY]))
        if malformed and draw(st.integers(0, 4)) == 0:
            value = draw(gs.malformed_frames())[0]
        else:
            value = draw(good_frames(kafka_ms))
        records.append(FakeRecord(offset, value, kafka_ms, b"k%d" % offset))
        offset += draw(st.integers(1, 3))  # gaps: compacted or transactional offsets
    return records


def lows_for(records: list[FakeRecord]) -> st.SearchStrategy[dict[str, int]]:
    first, last = records[0].offset(), records[-1].offset()
    return st.dictionaries(st.sampled_from(ORIGINS), st.integers(first - 2, last + 1), max_size=6)


def same(a: router.RoutedPoll, b: router.RoutedPoll) -> None:
    assert list(a.batches) == list(b.batches)  # origins in order of their first record
    assert a == b


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data(), window=windows)
def test_a_poll_of_frames_is_routed_over_columns_like_record_by_record(data, window):
    records = data.draw(polls(malformed=False))
    lows = data.draw(lows_for(records))
    columns = router._route_columns(records, lows, window)
    reference = route_each(records, lows, window)
    if columns is None:  # only an event time outside an unclamped window sends it back
        clamped = Window(window.past_ms, window.future_ms, clamp=True)
        assert not window.clamp and router._route_columns(records, lows, clamped) is not None
    else:
        same(columns, reference)


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
    assert routed is not None and routed.batches["fs"].offsets == [0, 1, 2]


def test_bounds_that_would_overflow_int64_go_record_by_record():
    frame = struct.pack(">iqii", 1, 5, 0, 0)
    records = [FakeRecord(0, frame, 2**62)]
    window = Window(2**62, 2**62)
    assert router._route_columns(records, {}, window) is None
    assert route(records, {}, window) == route_each(records, {}, window)
