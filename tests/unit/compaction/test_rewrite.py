"""The one rule of what may be rewritten, and that compaction's plan and repair's verdict
both answer by it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from garmexport.compaction.names import CompactedName
from garmexport.compaction.plan import InputFile, Range, plan_day
from garmexport.compaction.rewrite import day_closed, rewritable
from garmexport.protocol.naming import FileName, day_name
from garmexport.repair.rows import verdict

DAY = "2026-11-02"
offsets = st.integers(0, 10**6)
maybe_w = st.none() | offsets


def _w(w: int | None, origin: str = "fs"):  # noqa: ANN202 - CommittedPoint
    return lambda source, topic, partition, o: w if o == origin else None


@given(last=offsets, w=maybe_w, closed=st.booleans(), gen=st.integers(1, 99))
def test_a_compacted_file_may_always_be_rewritten(last: int, w: int | None, closed: bool,
                                                  gen: int) -> None:
    name = CompactedName("local", "t", gen, 0).format()
    assert rewritable("fs", DAY, name, last, _w(w), closed).ok


@given(first=offsets, extra=st.integers(0, 1000), w=maybe_w, closed=st.booleans(),
       partition=st.integers(0, 50))
def test_a_raw_file_only_at_or_below_w_and_in_a_closed_day(
        first: int, extra: int, w: int | None, closed: bool, partition: int) -> None:
    name = FileName("local", "t", partition, first).format()
    last = first + extra
    got = rewritable("fs", DAY, name, last, _w(w), closed)
    assert got.ok == (w is not None and last <= w and closed)
    if w is None:
        assert f"no marker names fs in partition {partition}" in got.why_not
    elif last > w:
        assert f"({last} > {w})" in got.why_not
    elif not closed:
        assert f"day {DAY} is not closed" in got.why_not


@given(w=maybe_w, closed=st.booleans())
def test_a_jvm_file_or_a_foreign_name_never(w: int | None, closed: bool) -> None:
    assert "JVM" in rewritable("fs", DAY, "0.index=3", 0, _w(w), closed).why_not
    assert "not named" in rewritable("fs", DAY, "mine.parquet", 0, _w(w), closed).why_not


def test_a_quarantined_file_is_measured_against_w_of_its_origin() -> None:
    name = FileName("local", "t", 0, 10, origin="_frame").format()
    assert rewritable("_quarantine", DAY, name, 20, _w(20, "_frame"), True).ok
    assert "no marker names _frame" in rewritable("_quarantine", DAY, name, 20, _w(20),
                                                  True).why_not


@given(day=st.integers(0, 40_000), last_closed=st.none() | st.integers(0, 40_000),
       earlier=st.integers(0, 400))
def test_days_close_in_order(day: int, last_closed: int | None, earlier: int) -> None:
    closed = day_closed(day_name(day), last_closed)
    assert closed == (last_closed is not None and day <= last_closed)
    if closed:
        assert day_closed(day_name(max(0, day - earlier)), last_closed)
    assert not day_closed(None, last_closed)


@given(first=offsets, extra=st.integers(0, 1000), w=maybe_w, partition=st.integers(0, 3))
def test_compactions_plan_and_repairs_verdict_agree_on_a_raw_file_of_a_closed_day(
        first: int, extra: int, w: int | None, partition: int) -> None:
    last = first + extra
    name = FileName("local", "t", partition, first).format()
    f = InputFile(name, "local", "t", 100, (Range(partition, first, last, extra + 1),))
    watermarks = {} if w is None else {("local", "t", partition): w}
    folded = bool(plan_day("fs", DAY, [f], watermarks, 1, 10**9).outputs)
    low = {} if w is None else {("local", "t", partition): {"fs": w}}
    repairable = verdict(f"fs/day={DAY}/{name}", last, low, {DAY}.__contains__).ok
    assert folded == repairable == (w is not None and last <= w)
