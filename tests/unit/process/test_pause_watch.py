"""Telling a process that was not scheduled from a busy one, and when a pause is recent."""

from __future__ import annotations

import pytest

from garmexport.process.pause_watch import Pauses, unscheduled_s


def test_a_late_wakeup_without_cpu_time_is_a_pause_and_a_busy_one_is_not() -> None:
    assert unscheduled_s(8.25, 0.05) == pytest.approx(8.0)  # SIGSTOP: no CPU meanwhile
    assert unscheduled_s(8.25, 7.9) is None  # a held GIL, a busy process: CPU ran
    assert unscheduled_s(1.5, 0.0) is None  # late, but within what load explains


def test_a_pause_is_seen_by_whoever_asks_first_and_forgotten_after_the_window() -> None:
    pauses = Pauses(wall=100.0, cpu=1.0)
    pauses.wakeup(100.25, 1.01)
    assert pauses.recent(100.3, 1.02, within_s=60) is None
    # resumed after 10 s: the lost session is reported before the watch wakes up
    seen = pauses.recent(110.5, 1.1, within_s=60)
    assert seen is not None and seen.seconds == pytest.approx(10.0)
    pauses.wakeup(110.6, 1.1)  # the same span: still the one pause
    assert pauses.recent(111.0, 1.2, within_s=60) == seen
    assert pauses.recent(171.0, 30.0, within_s=60) is None
