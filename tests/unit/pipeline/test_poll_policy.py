"""The reader's pacing: when the queued work is full, and how long a poll may wait."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from garmexport.pipeline.poll_policy import (
    MIN_IDLE_WAIT_S, SHORT_POLL_S, work_cap, work_full, poll_timeout_s,
)


def test_queued_work_may_hold_an_eighth_of_the_budget() -> None:
    assert work_cap(64 << 20) == 8 << 20
    assert not work_full(8 << 20, 64 << 20)
    assert work_full((8 << 20) + 1, 64 << 20)


def test_a_tiny_budget_still_lets_a_byte_through() -> None:
    assert work_cap(7) == 1
    assert not work_full(1, 7) and work_full(2, 7)


def test_a_quiet_reader_polls_for_the_configured_time() -> None:
    assert poll_timeout_s(1.0, None, writers_busy=False) == 1.0


def test_a_poll_waits_no_longer_than_until_a_burst_may_end() -> None:
    assert poll_timeout_s(1.0, 0.3, writers_busy=False) == 0.3
    assert poll_timeout_s(1.0, -2.0, writers_busy=False) == MIN_IDLE_WAIT_S  # overdue: not 0


def test_a_poll_is_short_while_the_writers_have_work() -> None:
    assert poll_timeout_s(1.0, None, writers_busy=True) == SHORT_POLL_S
    assert poll_timeout_s(1.0, 0.02, writers_busy=True) == 0.02
    assert poll_timeout_s(0.01, None, writers_busy=True) == 0.01


@given(st.floats(0.001, 10.0), st.none() | st.floats(-10.0, 10.0), st.booleans())
def test_the_timeout_is_positive_and_never_above_the_configured_one(
        configured: float, idle: float | None, busy: bool) -> None:
    t = poll_timeout_s(configured, idle, busy)
    assert 0 < t <= configured
    if busy:
        assert t <= SHORT_POLL_S
