"""Per-tier test time, printed at the end of every run (``tests/conftest.py`` registers it).

The suite has a budget (``tests/README.md``): the README's test command in 25 minutes on
the 2-core machine. This table says where a run spent its time, per tier and per phase
(fixture set-up, test body, teardown), so that a change that adds minutes is seen in its
own run. Under pytest-xdist the seconds are summed over the workers: they add up to more
than the wall clock.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests import spark_archive

_PHASES = ("setup", "call", "teardown")


class TierTimes:
    """Collects each report's duration by (tier, phase); prints the table at the end."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(_PHASES, 0.0))
        self.tests: dict[str, int] = defaultdict(int)
        self.notes: set[str] = set()

    @staticmethod
    def tier(nodeid: str) -> str:
        parts = nodeid.split("/")
        return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        tier = self.tier(report.nodeid)
        self.seconds[tier][report.when] += report.duration
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.tests[tier] += 1
        self.notes.update(value for name, value in report.user_properties
                          if name == spark_archive.PROPERTY)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.tests:
            return
        write = terminalreporter.write_line
        terminalreporter.section("time per tier (s, summed over workers)")
        write(f"{'tier':<12} {'tests':>6} {'setup':>8} {'call':>8} {'teardown':>9} {'total':>8}")
        totals = dict.fromkeys(_PHASES, 0.0)
        for tier in sorted(self.seconds, key=lambda t: -sum(self.seconds[t].values())):
            row = self.seconds[tier]
            for phase in _PHASES:
                totals[phase] += row[phase]
            write(f"{tier:<12} {self.tests[tier]:>6} {row['setup']:>8.1f} {row['call']:>8.1f} "
                  f"{row['teardown']:>9.1f} {sum(row.values()):>8.1f}")
        write(f"{'all':<12} {sum(self.tests.values()):>6} {totals['setup']:>8.1f} "
              f"{totals['call']:>8.1f} {totals['teardown']:>9.1f} {sum(totals.values()):>8.1f}")
        for note in sorted(self.notes):  # what made the Spark JVMs start faster, if anything
            write(note)
