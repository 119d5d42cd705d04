"""Lag in seconds: 0 when nothing waits, else the age of the record at the committed position."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from garmexport.observe.lag_time import MAX_SAMPLES, PositionTimes, lag_seconds, waiting
from garmexport.observe.metrics import Metrics
from garmexport.protocol.resume import Marker


def test_a_caught_up_partition_has_no_lag_however_old_its_records() -> None:
    assert not waiting(position=500, high_watermark=500)
    assert lag_seconds(False, oldest_ms=0, now_s=10_000.0) == 0.0


def test_an_unknown_watermark_counts_as_waiting() -> None:
    assert waiting(position=0, high_watermark=None)
    assert waiting(position=499, high_watermark=500)


def test_lag_is_now_minus_the_kafka_time_and_never_negative() -> None:
    assert lag_seconds(True, oldest_ms=4_000_000, now_s=7_600.0) == 3_600.0
    assert lag_seconds(True, oldest_ms=9_000_000, now_s=7_600.0) == 0.0


def test_the_newest_marker_times_the_position_until_records_are_read() -> None:
    old = Marker(0, {"fs": 40}, {}, processed=50, written_at_ms=0, low_event_ms=1_000_000)
    new = Marker(0, {"fs": 90}, {}, processed=120, written_at_ms=0, low_event_ms=2_000_000)
    times = PositionTimes.start([old, new], assigned_ms=9_000_000)
    assert times.time_at(91) == 2_000_000
    times.seen(91, 1_500_000)  # the re-read replaces the marker's estimate
    times.seen(300, 2_500_000)
    assert times.time_at(91) == 1_500_000
    assert times.time_at(400) == 2_500_000


def test_markers_without_a_kafka_time_fall_back_to_the_assignment_time() -> None:
    legacy = Marker(0, {"fs": 40}, {}, processed=50, written_at_ms=0)
    assert PositionTimes.start([legacy], assigned_ms=7).time_at(41) == 7
    assert PositionTimes.start([], assigned_ms=7).time_at(0) == 7


def test_a_seek_back_drops_the_samples_past_it() -> None:
    times = PositionTimes(0)
    times.seen(0, 1_000)
    times.seen(100, 5_000)
    times.seen(50, 3_000)
    assert times.time_at(100) == 3_000


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10_000)), min_size=1, max_size=4000),
       st.integers(0, 30_000))
def test_the_estimate_is_a_read_time_at_or_below_the_position(steps, position) -> None:  # noqa: ANN001
    """T(S) is the time of a sampled record at or below S whenever one was read there, and
    samples stay bounded however long the run."""
    times, offset, now, read = PositionTimes(-1), 0, 0, {}
    for gap, advance in steps:
        offset, now = offset + gap, now + advance
        times.seen(offset, now)
        read[offset] = now
        assert len(times) <= MAX_SAMPLES + 1
    estimate = times.time_at(position)
    below = [t for o, t in read.items() if o <= position]
    if below:
        assert estimate in below and estimate <= max(below)
    else:
        assert estimate == min(read.values())


def test_the_gauge_ages_at_each_scrape_and_goes_with_the_partition() -> None:
    registry, clock = CollectorRegistry(), [1_000.0]
    metrics = Metrics.create(registry, wall_s=lambda: clock[0])
    metrics.set_lag_time("garmadon", 0, waiting=True, oldest_ms=400_000)
    metrics.set_lag_time("garmadon", 1, waiting=False, oldest_ms=0)

    def lag(p: int) -> float | None:
        return registry.get_sample_value(
            "garmexport_consumer_lag_seconds", {"topic": "garmadon", "partition": str(p)})

    assert (lag(0), lag(1)) == (600.0, 0.0)
    clock[0] = 1_060.0  # the exporter stuck: nothing sets the gauge, it still ages
    assert (lag(0), lag(1)) == (660.0, 0.0)
    metrics.forget_partition("garmadon", 0)
    assert lag(0) is None and lag(1) == 0.0
