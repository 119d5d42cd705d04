"""The flush policy and the memory budget, as pure rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from garmexport.flush import FlushLimits, OpenFileInfo, WriterLoad, due, next_backoff_s, writers_to_flush

LIMITS = FlushLimits(max_file_rows=100, max_file_bytes=1000, max_file_age_s=60.0)


def test_a_file_is_due_at_its_row_size_or_age_limit_oldest_first():
    files = [OpenFileInfo("young", 1, 1, 100.0), OpenFileInfo("rows", 100, 1, 50.0),
             OpenFileInfo("bytes", 1, 1000, 40.0), OpenFileInfo("old", 1, 1, 39.0)]
    assert due(files, LIMITS, now_s=100.0) == ["old", "bytes", "rows"]
    assert due(files, LIMITS, now_s=98.9) == ["bytes", "rows"]


def test_backoff_doubles_from_the_initial_delay_and_stops_at_the_cap():
    assert [next_backoff_s(n, 0.5, 3.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


loads = st.lists(st.builds(WriterLoad, key=st.integers(), open_files=st.integers(0, 50),
                           buffered_bytes=st.integers(0, 10_000),
                           oldest_open_s=st.floats(0, 1e6), flush_requested=st.booleans()),
                 max_size=40, unique_by=lambda w: w.key)


@given(loads, st.integers(0, 300), st.integers(0, 100_000))
def test_what_stays_open_fits_the_budget_and_the_oldest_go_first(writers, max_files, max_bytes):
    chosen = set(writers_to_flush(writers, max_files, max_bytes))
    kept = [w for w in writers if w.open_files and not w.flush_requested and w.key not in chosen]
    assert sum(w.open_files for w in kept) <= max_files
    assert sum(w.buffered_bytes for w in kept) <= max_bytes
    assert not any(w.flush_requested for w in writers if w.key in chosen)
    if chosen:  # nothing kept is older than something chosen
        newest_chosen = max(w.oldest_open_s for w in writers if w.key in chosen)
        assert all(w.oldest_open_s >= newest_chosen for w in kept)
