"""When ``waiting_for_assignment`` is due: every ``every_s`` of a wait, none once assigned."""

from __future__ import annotations

import pytest

from garmexport.kafka.assignment_wait import AssignmentWait


def test_a_line_is_due_every_period_of_a_wait_and_none_once_assigned() -> None:
    wait = AssignmentWait(30.0, now=100.0)
    assert wait.due(129.9) is None
    assert wait.due(130.5) == pytest.approx(30.5)
    assert wait.due(150.0) is None  # the next is a period after the last line
    assert wait.due(160.5) == pytest.approx(60.5)
    wait.assigned()  # an assignment, even of no partition, ends the wait
    assert not wait.waiting and wait.due(1000.0) is None


def test_a_revoke_starts_a_new_wait_and_a_second_one_does_not_restart_it() -> None:
    wait = AssignmentWait(30.0, now=0.0)
    wait.assigned()
    wait.unassigned(200.0)
    wait.unassigned(210.0)  # still the same wait
    assert wait.due(229.0) is None
    assert wait.due(230.0) == pytest.approx(30.0)
    with pytest.raises(ValueError):
        AssignmentWait(0.0, now=0.0)
