"""The one back-off formula and the one failure state (garmexport.protocol.backoff)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garmexport.protocol.backoff import Backoff, jittered_delay_s, nominal_delay_s


def test_backoff_doubles_from_the_initial_delay_and_stops_at_the_cap():
    assert [nominal_delay_s(n, 0.5, 3.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_delays_double_up_to_the_cap() -> None:
    assert [jittered_delay_s(n, 1.0, 8.0, 1.0) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]
    assert jittered_delay_s(10_000, 0.5, 30.0, 1.0) == 30.0


def test_retry_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="starts at 1"):
        nominal_delay_s(0, 1.0, 8.0)


@given(st.integers(1, 200), st.floats(0.001, 10), st.floats(0.001, 100), st.floats(0, 0.999))
def test_jitter_keeps_each_delay_between_half_and_all_of_nominal(
        n: int, initial: float, cap: float, unit: float) -> None:
    nominal = min(cap, initial * 2.0 ** min(n - 1, 62))
    assert nominal / 2 <= jittered_delay_s(n, initial, cap, unit) <= nominal


def test_a_run_of_failures_waits_the_nominal_delay_and_a_success_ends_it() -> None:
    b = Backoff(initial_s=1.0, max_s=4.0)
    assert not b.waiting(0.0)
    assert [b.failed(now) for now in (10.0, 20.0, 30.0, 40.0)] == [1, 2, 3, 4]
    assert b.retry_at == 44.0  # the 4th failure waits min(4, 1 * 2**3)
    assert b.waiting(43.9) and not b.waiting(44.0)
    b.succeeded()
    assert b.failures == 0 and not b.waiting(40.0)
    assert b.failed(100.0) == 1 and b.retry_at == 101.0
