"""When a Kerberos ticket is renewed (the pure rule; the real KDC is in tests/storage)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garmexport.storage.ticket_renewal import Ticket, renewal_due, usable

TEN_HOURS = Ticket(obtained_s=1000.0, expires_s=1000.0 + 36_000)


@pytest.mark.parametrize("now_s, renew_s, due, why", [
    (1000.0, 3600, False, "just obtained"),
    (4599.0, 3600, False, "a second before the rhythm"),
    (4600.0, 3600, True, "renew_s after it was obtained"),
    (1000.0 + 28_799, 86_400, False, "just before 80 % of its lifetime"),
    (1000.0 + 28_800, 86_400, True, "80 % of its lifetime, before a long renew_s"),
    (1000.0 + 40_000, 86_400, True, "expired"),
])
def test_a_ticket_is_renewed_on_the_rhythm_or_at_80_percent_of_its_life(
        now_s: float, renew_s: float, due: bool, why: str) -> None:
    assert renewal_due(now_s, TEN_HOURS, renew_s) is due, why


def test_no_ticket_yet_is_due_at_once() -> None:
    assert renewal_due(0.0, None, 3600)


def test_after_a_failure_the_next_attempt_waits() -> None:
    assert not renewal_due(1010.0, None, 3600, last_failure_s=1000.0, retry_s=30)
    assert renewal_due(1030.0, None, 3600, last_failure_s=1000.0, retry_s=30)
    assert not renewal_due(4700.0, TEN_HOURS, 3600, last_failure_s=4690.0, retry_s=30)


def test_a_ticket_is_usable_until_it_ends() -> None:
    assert usable(1000.0 + 35_999, TEN_HOURS)
    assert not usable(1000.0 + 36_000, TEN_HOURS) and not usable(0.0, None)


@given(lifetime=st.integers(5, 10**6), renew_s=st.integers(1, 10**6),
       start=st.integers(0, 2 * 10**9))
def test_a_ticket_is_always_renewed_before_it_ends(lifetime: float, renew_s: float,
                                                   start: float) -> None:
    """Whatever renew_s, the rule fires with a tenth of the lifetime still left, and a
    renew_s longer than the ticket does not make it fire before 70 % of it."""
    ticket = Ticket(start, start + lifetime)
    assert renewal_due(start + lifetime * 0.9, ticket, renew_s)
    assert not renewal_due(start + lifetime * 0.7, ticket, lifetime + renew_s)
