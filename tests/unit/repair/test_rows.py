"""Which rows ``repair duplicates`` takes out, which files it may rewrite, and the rewrite
of one table (``repair_swap.without``)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from garmexport.repair.rows import (Left, Rewritable, plan, quarantine_copies, verdict)
from garmexport.repair.swap import without

RAW = "fs/day=2026-11-02/local+t+00000+00000000000000000010.parquet"
RAW2 = "fs/day=2026-11-02/local+t+00000+00000000000000000020.parquet"
COMPACTED = "fs/day=2026-11-02/local+t+c000001+00000.parquet"
JVM = "fs/day=2026-11-02/0.index=3"
QUARANTINED = "_quarantine/day=2026-11-02/local+t+00000+00000000000000000010+_frame.parquet"
LOW = {("local", "t", 0): {"fs": 100, "_frame": 100}}


def _all_ok(path: str) -> Rewritable:
    return Rewritable()


def test_a_file_doubled_whole_goes_and_the_others_are_not_touched() -> None:
    held = {(0, o): [RAW, COMPACTED] for o in range(10, 15)}
    held |= {(0, o): [COMPACTED] for o in range(15, 17)}  # the restored copy holds more
    rows = plan(held, _all_ok)
    # RAW is doubled whole (5 of 5), COMPACTED 5 of 7: RAW goes, COMPACTED stays whole
    assert rows.drops == {RAW: Counter({(0, o): 1 for o in range(10, 15)})}
    assert rows.fixed == 5 and not rows.left and rows.rows == 5


def test_a_copy_that_cannot_be_rewritten_is_the_one_kept() -> None:
    held = {(0, 10): [RAW, JVM]}
    can = {RAW: Rewritable(), JVM: Rewritable("a JVM file")}
    rows = plan(held, can.__getitem__)
    assert rows.drops == {RAW: Counter({(0, 10): 1})} and not rows.left


def test_two_copies_that_cannot_be_rewritten_are_left_and_said() -> None:
    held = {(0, 10): [JVM, RAW, RAW2]}
    can = {RAW: Rewritable("above"), JVM: Rewritable("a JVM file"), RAW2: Rewritable()}
    rows = plan(held, can.__getitem__)
    assert rows.drops == {RAW2: Counter({(0, 10): 1})}
    assert rows.left == [Left(0, 10, ((JVM, "a JVM file"), (RAW, "above")))]
    assert rows.fixed == 0


def test_a_dataset_row_is_kept_over_the_quarantine_one() -> None:
    held = {(0, 10): [QUARANTINED, RAW]}
    assert plan(held, _all_ok).drops == {QUARANTINED: Counter({(0, 10): 1})}


def test_one_file_holding_a_record_twice_keeps_one_row() -> None:
    rows = plan({(0, 10): [RAW, RAW]}, _all_ok)
    assert rows.drops == {RAW: Counter({(0, 10): 1})}


def test_wanted_picks_the_records_worked_on() -> None:
    held = {(0, 10): [QUARANTINED, RAW], (0, 11): [RAW, COMPACTED]}
    rows = plan(held, _all_ok, quarantine_copies)
    assert rows.drops == {QUARANTINED: Counter({(0, 10): 1})}
    assert quarantine_copies((0, 1), [QUARANTINED, QUARANTINED]) is False


def test_the_verdict_follows_compactions_rules() -> None:
    closed = {"2026-11-02"}.__contains__
    assert verdict(RAW, 100, LOW, closed).ok
    assert "above the committed point (101 > 100)" in verdict(RAW, 101, LOW, closed).why_not
    assert "not closed" in verdict(RAW, 50, LOW, lambda day: False).why_not
    assert verdict(COMPACTED, 10**9, LOW, lambda day: False).ok  # its rows are all <= W
    assert "JVM" in verdict(JVM, 1, LOW, closed).why_not
    assert "no marker names gc" in verdict(RAW.replace("fs/", "gc/"), 1, LOW, closed).why_not
    assert "not named by garmexport" in verdict("fs/day=2026-11-02/mine.parquet", 1, LOW,
                                                closed).why_not
    assert verdict(QUARANTINED, 100, LOW, closed, datasets=False).ok
    assert "leaves datasets alone" in verdict(RAW, 1, LOW, closed, datasets=False).why_not


def test_without_drops_the_first_rows_counted_and_updates_the_kept_ones() -> None:
    table = pa.table({"kafka_partition": pa.array([0, 0, 0, 1], pa.int32()),
                      "kafka_offset": pa.array([5, 5, 6, 5], pa.int64()),
                      "reason": ["a", "b", "c", "d"]})
    kept, updated = without(table, Counter({(0, 5): 1}), {(0, 6): {"reason": "new"}})
    assert kept.to_pydict() == {"kafka_partition": [0, 0, 1], "kafka_offset": [5, 6, 5],
                                "reason": ["b", "new", "d"]}
    assert updated == 1
    assert kept.schema == table.schema


_FILES = [RAW, RAW2, COMPACTED, JVM, QUARANTINED]


@given(st.dictionaries(st.tuples(st.integers(0, 1), st.integers(0, 30)),
                       st.lists(st.sampled_from(_FILES), min_size=1, max_size=5),
                       max_size=40),
       st.sets(st.sampled_from(_FILES)))
def test_every_record_keeps_a_row_and_only_rewritable_files_lose_any(
        held: dict[tuple[int, int], list[str]], stuck: set[str]) -> None:
    can = {f: Rewritable("stuck" if f in stuck else "") for f in _FILES}
    rows = plan(held, can.__getitem__)
    assert all(can[path].ok for path in rows.drops)  # only rewritable files lose rows
    left = {(r.partition, r.offset) for r in rows.left}
    for key, copies in held.items():
        dropped = sum(rows.drops.get(path, Counter())[key] for path in set(copies))
        remaining = len(copies) - dropped
        fixed_copies = sum(not can[c].ok for c in copies)
        assert remaining == max(1, fixed_copies)  # one row, or every copy it cannot touch
        assert (key in left) == (fixed_copies > 1)
    assert rows.fixed == sum(len(c) > 1 for c in held.values()) - len(left)
