"""The alert rules are valid, complete, and each is unit-tested firing and not firing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.system_tools import REQUIRED

CONFIG = Path(__file__).resolve().parents[3] / "config"
RULES = CONFIG / "alerts.yml"
RULE_TESTS = CONFIG / "alerts_test.yml"
PROMTOOL = shutil.which("promtool")
# skipped without promtool, except under `tox -e system`, where a missing promtool fails
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None and not REQUIRED,
    reason="promtool not installed (Debian: apt-get install --no-install-recommends prometheus)")


def alerts() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"]
            for rule in group["rules"]]


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120,
                          cwd=CONFIG)


@needs_promtool
def test_promtool_accepts_the_rules() -> None:
    result = promtool("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_rule_tests_pass() -> None:
    result = promtool("test", "rules", RULE_TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_has_for_severity_summary_and_description() -> None:
    rules = alerts()
    assert rules
    for rule in rules:
        assert "alert" in rule, f"recording rules do not belong in {RULES.name}: {rule}"
        assert rule.get("for"), rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert rule["annotations"].get("summary"), rule["alert"]
        assert rule["annotations"].get("description"), rule["alert"]


def test_alert_names_are_unique() -> None:
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names))


def test_every_rule_is_tested_both_firing_and_silent() -> None:
    cases = [case for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for case in test.get("alert_rule_test", [])]
    fires = {case["alertname"] for case in cases if case.get("exp_alerts")}
    silent = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    names = {rule["alert"] for rule in alerts()}
    assert names - fires == set(), "rules never seen firing"
    assert names - silent == set(), "rules never seen silent"
    assert (fires | silent) - names == set(), "tests of rules that do not exist"
