"""The flush policy and the memory budget, as pure rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garmexport.protocol.flush import (
    FlushLimits, OpenFileInfo, WriterLoad, burst_ends_in, due, tick_wanted, writers_to_flush,
)

LIMITS = FlushLimits(max_file_rows=100, max_file_bytes=1000, max_file_age_s=60.0)


def test_a_file_is_due_at_its_row_size_or_age_limit_oldest_first():
    files = [OpenFileInfo("young", 1, 1, 100.0), OpenFileInfo("rows", 100, 1, 50.0),
             OpenFileInfo("bytes", 1, 1000, 40.0), OpenFileInfo("old", 1, 1, 39.0)]
    assert due(files, LIMITS, now_s=100.0) == ["old", "bytes", "rows"]
    assert due(files, LIMITS, now_s=98.9) == ["bytes", "rows"]


def test_a_tick_goes_to_a_writer_with_a_file_past_its_age_or_a_failing_store():
    assert not tick_wanted(None, False, 60.0, now_s=1000.0)  # nothing open
    assert not tick_wanted(950.0, False, 60.0, now_s=1000.0)  # open, young
    assert tick_wanted(940.0, False, 60.0, now_s=1000.0)  # open, its age reached
    assert tick_wanted(None, True, 60.0, now_s=1000.0)  # a publish to retry, or a wait


@given(st.one_of(st.none(), st.floats(0, 1e6)), st.booleans(), st.floats(0, 1e4),
       st.floats(0, 1e6))
def test_a_writer_not_ticked_has_no_file_due_by_age(oldest, failing, age_s, now_s):
    """Whatever the tick would find due (due(), age only: rows and bytes are checked on
    every batch) is found only if the writer is ticked."""
    files = [] if oldest is None else [OpenFileInfo("oldest", 1, 1, oldest),
                                       OpenFileInfo("younger", 1, 1, oldest + 1.0)]
    limits = FlushLimits(max_file_rows=10**9, max_file_bytes=10**15, max_file_age_s=age_s)
    if due(files, limits, now_s):
        assert tick_wanted(oldest, failing, age_s, now_s)


loads = st.lists(st.builds(WriterLoad, key=st.integers(), open_files=st.integers(0, 50),
                           buffered_bytes=st.integers(0, 10_000),
                           oldest_open_s=st.floats(0, 1e6), flush_requested=st.booleans()),
                 max_size=40, unique_by=lambda w: w.key)


@given(loads, st.integers(0, 300), st.integers(0, 100_000), st.integers(0, 200_000))
def test_what_stays_open_fits_the_budget_and_the_oldest_go_first(writers, max_files, max_bytes,
                                                                  pending):
    chosen = set(writers_to_flush(writers, max_files, max_bytes, pending))
    kept = [w for w in writers if w.open_files and not w.flush_requested and w.key not in chosen]
    assert sum(w.open_files for w in kept) <= max_files
    if pending <= max_bytes:
        assert pending + sum(w.buffered_bytes for w in kept) <= max_bytes
    else:  # the gathered records alone are over: nothing that could go stays open
        assert not kept
    assert not any(w.flush_requested for w in writers if w.key in chosen)
    if chosen:  # nothing kept is older than something chosen
        newest_chosen = max(w.oldest_open_s for w in writers if w.key in chosen)
        assert all(w.oldest_open_s >= newest_chosen for w in kept)


def never_behind() -> bool:
    return False


def always_behind() -> bool:
    return True


def test_a_burst_ends_idle_s_after_its_last_record():
    assert burst_ends_in(500, 100, last_record_s=10.0, idle_s=0.5, now_s=10.2, behind=never_behind) == pytest.approx(0.3)
    assert burst_ends_in(500, 100, last_record_s=10.0, idle_s=0.5, now_s=10.5, behind=never_behind) == 0.0
    assert burst_ends_in(500, 100, last_record_s=10.0, idle_s=0.5, now_s=12.0, behind=never_behind) < 0


def test_no_burst_when_too_few_records_arrived_or_the_idle_flush_is_off():
    assert burst_ends_in(99, 100, last_record_s=0.0, idle_s=0.5, now_s=9.0, behind=never_behind) is None
    assert burst_ends_in(500, 100, last_record_s=0.0, idle_s=0.0, now_s=9.0, behind=never_behind) is None


def test_a_partition_with_records_waiting_in_the_consumer_is_not_quiet():
    assert burst_ends_in(500, 100, last_record_s=0.0, idle_s=0.5, now_s=9.0, behind=always_behind) is None


def test_the_consumer_is_asked_only_once_the_time_is_up():
    asked = []

    def behind() -> bool:
        asked.append(1)
        return True

    assert burst_ends_in(500, 100, last_record_s=10.0, idle_s=0.5, now_s=10.1, behind=behind) > 0
    assert asked == []
