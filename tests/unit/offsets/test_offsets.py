"""The pure parts of ``garmexport offsets``: the table, the planned markers, the time search."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garmexport.protocol.naming import IntentName, MarkerName
from garmexport.offsets.start_at import apply, first_offset_at_or_after, plan_move
from garmexport.offsets.table import build_row, render, to_json
from garmexport.pipeline.recovery import Recovered, read_partition_state
from garmexport.protocol.resume import Chain, Marker, merge_state
from garmexport.pipeline.router import ORIGINS
from garmexport.storage.open import open_storage

NOW_MS = 1_793_700_000_000


def recovered(*markers: Marker, intents: tuple[IntentName, ...] = ()) -> Recovered:
    named = {MarkerName("e1", i + 1): m for i, m in enumerate(markers)}
    return Recovered(merge_state(0, markers), named, intents, 0)


def marker(low: dict[str, int], last: dict[Chain, int] | None = None) -> Marker:
    return Marker(0, low, last or {}, max(low.values()), NOW_MS)


# --- the table ---------------------------------------------------------------------------

def test_row_seeks_after_the_lowest_watermark_and_lags_behind_the_end() -> None:
    rec = recovered(marker({"fs": 99, "gc": 120}, {Chain("fs", "d", "2026-11-02"): 130}),
                    marker({"fs": 80, "gc": 150}))
    row = build_row(0, rec, end=1000)
    assert (row.seek, row.lag, row.markers) == (100, 900, 2)
    assert row.low == {"fs": 99, "gc": 150}
    assert row.days == {"fs": {"d": {"2026-11-02": 130}}}


def test_row_without_a_marker_lags_from_the_first_run_start_and_never_goes_negative() -> None:
    assert build_row(3, None, end=500, first_run_start=20).lag == 480
    assert build_row(3, None, end=500).lag is None
    assert build_row(0, recovered(marker({"fs": 600})), end=500).lag == 0
    assert build_row(0, recovered(marker({"fs": 10})), end=None).lag is None


def test_json_and_table_show_every_origin_and_the_total_lag() -> None:
    rows = [build_row(0, recovered(marker({"fs": 9, "_frame": 4})), end=20), build_row(1, None, 7, 0)]
    doc = to_json("local", "garmadon", rows)
    assert doc["total_lag"] == 15 + 7
    assert doc["partitions"][0]["low"] == {"_frame": 4, "fs": 9}
    text = render("local", "garmadon", rows)
    assert "W=9" in text and "W=4" in text and "no marker" in text
    assert to_json("local", "t", [build_row(0, None)])["total_lag"] is None


# --- planning a move ---------------------------------------------------------------------

def test_forward_move_writes_one_marker_with_every_router_origin_just_below_the_offset() -> None:
    rec = recovered(marker({"fs": 99, "gc": 120}, {Chain("gc", "d", "2026-11-01"): 400}))
    move = plan_move(0, 300, rec, ORIGINS, now_ms=NOW_MS, end=1000)
    assert move.refused is None and not move.backwards
    assert move.marker is not None and set(move.marker.low) == set(ORIGINS)
    assert set(move.marker.low.values()) == {299}
    assert move.marker.last == {Chain("gc", "d", "2026-11-01"): 400}  # still above W: kept
    assert (move.old_seek, move.new_seek, move.skipped) == (100, 300, 200)
    assert move.delete_markers == () and move.delete_intents == ()
    assert any("skips 200 offsets" in w for w in move.warnings)


def test_forward_move_result_merged_with_the_old_markers_seeks_exactly_at_the_offset() -> None:
    old = marker({"fs": 99, "gc": 120}, {Chain("gc", "d", "2026-11-01"): 400})
    move = plan_move(0, 300, recovered(old), ORIGINS, now_ms=NOW_MS)
    merged = merge_state(0, [old, move.marker])
    assert merged.seek() == 300
    assert 350 <= merged.for_origin("gc").skip_bound("d", "2026-11-01")  # the chain skip still holds
    assert not 300 <= merged.for_origin("fs").skip_bound("d", "2026-11-01")


def test_moving_back_over_committed_data_is_refused_without_force() -> None:
    rec = recovered(marker({"fs": 99, "gc": 500}))
    move = plan_move(0, 300, rec, ORIGINS, now_ms=NOW_MS)
    assert move.marker is None and move.refused and "501" in move.refused
    assert move.behind == ("gc",)


def test_forced_backward_move_replaces_every_marker_and_intent() -> None:
    intent = IntentName("gc", "d", "2026-11-01", 450)
    rec = recovered(marker({"fs": 99, "gc": 500}, {Chain("fs", "d", "2026-11-01"): 700}),
                    marker({"fs": 50, "gc": 400}), intents=(intent,))
    move = plan_move(0, 10, rec, ORIGINS, now_ms=NOW_MS, force=True)
    assert move.refused is None and move.marker is not None
    assert move.marker.last == {} and set(move.marker.low.values()) == {9}
    assert move.delete_markers == tuple(sorted(rec.markers)) and move.delete_intents == (intent,)
    assert merge_state(0, [move.marker]).seek() == 10


def test_offsets_past_the_end_are_refused_unless_forced_and_negative_ones_raise() -> None:
    assert plan_move(0, 1001, None, ORIGINS, now_ms=NOW_MS, end=1000).refused
    assert plan_move(0, 1000, None, ORIGINS, now_ms=NOW_MS, end=1000).refused is None
    assert plan_move(0, 1001, None, ORIGINS, now_ms=NOW_MS, end=1000, force=True).marker
    with pytest.raises(ValueError):
        plan_move(0, -1, None, ORIGINS, now_ms=NOW_MS)


def test_a_first_run_partition_counts_skipped_offsets_from_its_start() -> None:
    move = plan_move(2, 70, None, ORIGINS, now_ms=NOW_MS, end=100, first_run_start=0)
    assert (move.old_seek, move.old_position, move.skipped) == (None, 0, 70)
    assert move.marker is not None and move.marker.partition == 2


def test_setting_the_position_a_partition_already_has_writes_nothing() -> None:
    rec = recovered(marker({o: 41 for o in ORIGINS}))
    move = plan_move(0, 42, rec, ORIGINS, now_ms=NOW_MS)
    assert move.marker is None and move.refused is None and move.skipped == 0


def test_apply_writes_the_marker_before_deleting_what_it_replaces(tmp_path) -> None:
    storage = open_storage(str(tmp_path), "unit")
    rec = recovered(marker({"fs": 99, "gc": 500}), intents=(IntentName("gc", "d", "2026-11-01", 450),))
    from garmexport.pipeline.publisher import write_marker
    for name, m in rec.markers.items():
        write_marker(storage, "local", "t", name, m)
    storage.put_exclusive("_offsets/local+t/00000/" + rec.intents[0].format(), b"")
    move = plan_move(0, 10, read_partition_state(storage, "local", "t", 0), ORIGINS,
                     now_ms=NOW_MS, force=True)
    done = apply(storage, "local", "t", move)
    assert done[0].startswith("_offsets/local+t/00000/m+offsets-set-") and len(done) == 3
    after = read_partition_state(storage, "local", "t", 0)
    assert after.state.seek() == 10 and len(after.markers) == 1 and after.intents == ()
    assert apply(storage, "local", "t", plan_move(0, 10, after, ORIGINS, now_ms=NOW_MS)) == []


# --- finding the offset of a time --------------------------------------------------------

class FakePartition:
    """Records at ``offsets`` with ``stamps``; counts probes like a broker fetch."""

    def __init__(self, offsets: list[int], stamps: list[int]) -> None:
        self.offsets, self.stamps, self.calls = offsets, stamps, 0

    def probe(self, offset: int) -> tuple[int, int] | None:
        self.calls += 1
        i = bisect.bisect_left(self.offsets, offset)
        return None if i == len(self.offsets) else (self.offsets[i], self.stamps[i])

    def expected(self, ts: int, end: int) -> int:
        return next((o for o, t in zip(self.offsets, self.stamps) if t >= ts), end)


@given(st.lists(st.integers(0, 50), max_size=200), st.integers(-5, 2600),
       st.sets(st.integers(0, 250), max_size=30))
def test_search_finds_the_first_record_at_or_after_the_time(steps, ts, holes) -> None:
    stamps = [1000 + sum(steps[:i + 1]) for i in range(len(steps))]
    offsets = [o for o in range(len(steps) + len(holes)) if o not in holes][:len(steps)]
    part = FakePartition(offsets, stamps[:len(offsets)])
    end = offsets[-1] + 1 if offsets else 0
    found, probes, trusted = first_offset_at_or_after(ts, 0, end, part.probe)
    expected = part.expected(ts, end)
    # without records at some offsets, any offset in the hole before the answer seeks alike
    assert found == expected or (found < expected and all(o not in offsets for o in range(found, expected)))
    assert not trusted and probes <= max(1, end).bit_length() + 1


def test_a_broker_answer_that_the_records_confirm_is_used_without_searching() -> None:
    part = FakePartition(list(range(1000)), [10 * i for i in range(1000)])
    assert first_offset_at_or_after(2500, 0, 1000, part.probe, hint=250) == (250, 2, True)
    assert first_offset_at_or_after(-7, 0, 1000, part.probe, hint=0) == (0, 1, True)
    assert first_offset_at_or_after(99_999, 0, 1000, part.probe, hint=1000)[::2] == (1000, True)


def test_a_broker_answering_zero_for_every_time_is_not_trusted() -> None:
    part = FakePartition(list(range(1000)), [10 * i for i in range(1000)])
    found, probes, trusted = first_offset_at_or_after(2501, 0, 1000, part.probe, hint=0)
    assert (found, trusted) == (251, False) and probes <= 2 + 11


# --- the command's argument rules --------------------------------------------------------

def parse(*argv: str):
    import argparse

    from garmexport.cli.offsets import add_arguments
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_offsets_pair_with_partitions_in_order_or_one_value_serves_all() -> None:
    from garmexport.cli.offsets import _targets
    assert _targets(parse("set", "--partition", "2", "--offset", "5", "--partition", "0",
                          "--offset", "9"), [0, 1, 2]) == {2: 5, 0: 9}
    assert _targets(parse("set", "--all-partitions", "--offset", "7"), [0, 1]) == {0: 7, 1: 7}
    assert _targets(parse("set", "--partition", "1", "--partition", "0", "--timestamp",
                          "2026-11-03T00:00:00"), [0, 1]) == {1: NOW_MS - 36_000_000,
                                                              0: NOW_MS - 36_000_000}


@pytest.mark.parametrize("argv", [
    ("set", "--partition", "0"),                                        # no value
    ("set", "--partition", "0", "--offset", "1", "--timestamp", "5"),   # both kinds
    ("set", "--offset", "1"),                                           # no partition
    ("set", "--all-partitions", "--partition", "0", "--offset", "1"),
    ("set", "--partition", "0", "--partition", "1", "--offset", "1", "--offset", "2", "--offset", "3"),
    ("set", "--partition", "0", "--partition", "0", "--offset", "1"),
    ("set", "--partition", "7", "--offset", "1"),                       # not in the topic
])
def test_ambiguous_or_impossible_targets_are_usage_errors(argv) -> None:
    from garmexport.cli.offsets import _targets
    from garmexport.errors import ConfigError
    with pytest.raises(ConfigError):
        _targets(parse(*argv), [0, 1])


def test_timestamps_read_as_epoch_ms_or_iso_8601_in_utc_unless_a_zone_is_given() -> None:
    assert parse("set", "--timestamp", "1793700000000").timestamp == [NOW_MS]
    assert parse("set", "--timestamp", "2026-11-03T10:00:00").timestamp == [NOW_MS]
    assert parse("set", "--timestamp", "2026-11-03T11:00:00+01:00").timestamp == [NOW_MS]
    with pytest.raises(SystemExit):
        parse("set", "--timestamp", "yesterday")
