"""The gaps plan of ``garmexport repair``: fill at or below W, leave the rest, say what is lost."""

from __future__ import annotations

import numpy as np

from garmexport.pipeline.router import OriginBatch
from garmexport.protocol.naming import MS_PER_DAY, day_number
from garmexport.protocol.resume import PartitionState
from garmexport.repair.gaps import Run, Stretch, lost_runs, plan, select, stretches
from garmexport.wire import frames
from garmexport.wire.events import by_output

DAY = day_number("2026-11-02")


#: a body no protobuf parser accepts: a length-delimited field announcing 127 bytes of 4
BROKEN = b"\x0a\x7fxxxx"


def _batch(offsets: list[int], bad: tuple[int, ...] = (), day: int = DAY,
           bad_body: tuple[int, ...] = (), origin: str = "fs") -> OriginBatch:
    """Records of ``origin`` at ``offsets``, of event day ``day``; those at indexes ``bad``
    routed bad and those at ``bad_body`` with a body that does not parse, their Kafka time
    on the day before."""
    n = len(offsets)
    marker = by_output(origin).marker
    values: list[bytes | None] = [
        frames.encode(marker, day * MS_PER_DAY, b"", BROKEN if i in bad_body else b"")
        for i in range(n)]
    kafka = [(day - 1 if i in bad + bad_body else day) * MS_PER_DAY + 5 for i in range(n)]
    return OriginBatch(np.array(offsets, np.int64), values, np.array(kafka, np.int64),
                       np.full(n, day, np.int64),
                       [(i, "unknown_marker", "x", None) for i in bad],
                       sum(len(v) for v in values if v is not None))


def _state(low: dict[str, int]) -> PartitionState:
    return PartitionState(0, low, has_marker=True)


def test_records_at_or_below_w_are_filled_and_those_above_are_left_in_flight() -> None:
    todo = plan({(0, "fs"): _batch([10, 20, 30, 40])}, {0: _state({"fs": 30, "gc": 5})})
    [fill] = todo.fills
    assert (fill.partition, fill.origin, fill.batch.offsets.tolist()) == (0, "fs", [10, 20, 30])
    assert todo.adds == [Stretch("fs", "2026-11-02", 0, 10, 30, 3)]
    assert todo.in_flight == [Stretch("fs", "2026-11-02", 0, 40, 40, 1)]
    assert todo.rows == 3 and not todo.unmarked


def test_an_origin_no_marker_names_is_committed_up_to_the_seek_position_only() -> None:
    # W of a type no marker names is the partition's seek position - 1 (min W): 5
    todo = plan({(0, "container"): _batch([5, 6], origin="container")},
                {0: _state({"fs": 30, "gc": 5})})
    assert [f.batch.offsets.tolist() for f in todo.fills] == [[5]]
    assert [s.first for s in todo.in_flight] == [6]


def test_a_partition_without_marker_fills_nothing() -> None:
    todo = plan({(1, "fs"): _batch([1, 2])}, {1: PartitionState(1)})
    assert todo.fills == [] and todo.unmarked == [1]
    assert todo.in_flight == [Stretch("fs", "2026-11-02", 1, 1, 2, 2)]


def test_bad_records_are_planned_into_the_quarantine_of_their_kafka_day() -> None:
    found = sorted(stretches(0, "fs", _batch([3, 4, 9], bad=(1,))))
    assert found == [Stretch("_quarantine", "2026-11-01", 0, 4, 4, 1),
                     Stretch("fs", "2026-11-02", 0, 3, 9, 2)]


def test_a_good_head_with_a_bad_body_is_planned_into_the_quarantine_as_the_writer_puts_it() -> None:
    # the router passes it (its head is good); the writer's decoder quarantines it, on its
    # Kafka day: the dry run must say so, not fs on its event day (issue 40)
    found = sorted(stretches(0, "fs", _batch([3, 4, 9], bad_body=(1,))))
    assert found == [Stretch("_quarantine", "2026-11-01", 0, 4, 4, 1),
                     Stretch("fs", "2026-11-02", 0, 3, 9, 2)]


def test_select_keeps_the_bad_marks_of_the_records_it_keeps() -> None:
    batch = _batch([1, 2, 3, 4], bad=(0, 2))
    kept = select(batch, np.array([False, True, True, True]))
    assert kept.offsets.tolist() == [2, 3, 4]
    assert [b[0] for b in kept.bad] == [1]  # the record at offset 3, now second
    assert kept.values == batch.values[1:] and kept.nbytes == batch.nbytes * 3 // 4


def test_the_plan_groups_what_it_adds_per_place_and_day() -> None:
    todo = plan({(0, "fs"): _batch([1, 2], bad=(1,)), (1, "fs"): _batch([7])},
                {0: _state({"fs": 9}), 1: PartitionState(1, {"fs": 9}, has_marker=True)})
    assert list(todo.by_place(todo.adds)) == [("_quarantine", "2026-11-01"),
                                              ("fs", "2026-11-02")]
    assert [s.partition for s in todo.by_place(todo.adds)[("fs", "2026-11-02")]] == [0, 1]


def test_offsets_below_the_brokers_first_that_no_row_holds_are_lost() -> None:
    assert lost_runs(0, [5, 6, 9, 20, 21], broker_first=15) == [Run(0, 7, 8), Run(0, 10, 14)]
    assert Run(0, 10, 14).count == 5


def test_nothing_is_lost_below_the_first_held_offset_or_above_the_brokers_first() -> None:
    assert lost_runs(0, [100, 101], broker_first=0) == []
    assert lost_runs(0, [100, 101], broker_first=102) == []
    assert lost_runs(0, [], broker_first=50) == []
