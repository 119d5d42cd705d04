"""The dashboard and the alert rules speak only the vocabulary garmexport.observe.metrics defines."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from garmexport.observe.metrics import CompactionMetrics, Metrics
from tests.system_tools import REQUIRED

CONFIG = Path(__file__).resolve().parents[3] / "config"
DASHBOARD = CONFIG / "dashboard.json"
RULES = CONFIG / "alerts.yml"
# Series Prometheus makes itself for every target.
PROMETHEUS_SERIES = {"up"}
_SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "info": ("_info",),
             "histogram": ("_bucket", "_count", "_sum", "_created")}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
             "group_left", "group_right", "inf", "nan"}


def exposed_names() -> set[str]:
    """Every sample name a fresh Metrics registry can expose, labelled or not, and those
    compaction reports (CompactionMetrics, with its last success time)."""
    registry = CollectorRegistry()
    Metrics.create(registry)
    CompactionMetrics.create(registry).last_success(0.0)
    return {family.name + suffix for family in registry.collect()
            for suffix in _SUFFIXES[family.type]}


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects: strip strings, label matchers, ranges and
    grouping clauses, then keep the identifiers that are not functions or keywords."""
    expr = _STRING.sub('""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = _GROUPING.sub(" ", expr)
    return {name for name in _NAME.findall(expr) if name.lower() not in _KEYWORDS}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels() -> list[dict]:
    top = dashboard()["panels"]
    return top + [inner for panel in top for inner in panel.get("panels", [])]


def dashboard_exprs() -> list[str]:
    return [target["expr"] for panel in panels() for target in panel.get("targets", [])]


def alert_exprs() -> list[str]:
    return [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"]
            for rule in group["rules"]]


def test_the_parser_finds_names_and_ignores_functions_labels_and_keywords() -> None:
    expr = ('sum by (job, reason) (rate(garmexport_quarantined_total{reason="bad body"}[5m]))'
            ' / ignoring (reason) group_left sum(rate(garmexport_typo_total[$__rate_interval]))'
            ' > 1e6 and on () time() - max(x_y offset 5m) > bool 0')
    assert metric_names(expr) == {"garmexport_quarantined_total", "garmexport_typo_total", "x_y"}


def test_exposed_names_include_the_derived_sample_names() -> None:
    names = exposed_names()
    assert {"garmexport_events_consumed_total", "garmexport_publish_duration_seconds_bucket",
            "garmexport_build_info", "garmexport_consumer_lag_offsets"} <= names
    assert "garmexport_events_consumed" not in names


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_every_expression_uses_only_defined_metrics(source: str) -> None:
    exprs = dashboard_exprs() if source == "dashboard" else alert_exprs()
    assert exprs
    known = exposed_names() | PROMETHEUS_SERIES
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric found in {expr!r}"
        assert names <= known, f"unknown {sorted(names - known)} in {expr!r}"


def test_template_queries_use_only_defined_metrics() -> None:
    known = exposed_names()
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            metric = re.fullmatch(r"label_values\((\w+),\s*\w+\)", variable["query"]["query"])
            assert metric and metric.group(1) in known, variable["name"]


def test_every_panel_reads_the_datasource_variable() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels():
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])


def test_panels_have_unique_ids_and_fit_the_grid() -> None:
    board = dashboard()
    assert board["schemaVersion"] >= 36 and board["uid"]
    ids = [panel["id"] for panel in panels()]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in panels():
        pos = panel["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, panel["title"]
        area = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area


def test_the_dashboard_covers_the_operating_questions() -> None:
    used = set().union(*map(metric_names, dashboard_exprs()))
    for name in ("garmexport_consumer_lag_offsets", "garmexport_consumer_lag_seconds",
                 "garmexport_last_committed_event_timestamp_seconds",
                 "garmexport_events_consumed_total", "garmexport_events_exported_total",
                 "garmexport_files_published_total", "garmexport_bytes_published_total",
                 "garmexport_quarantined_total", "garmexport_open_writers",
                 "garmexport_oldest_open_file_age_seconds", "garmexport_fencing_conflicts_total",
                 "garmexport_storage_failures_total", "garmexport_rebalances_total"):
        assert name in used, name


@pytest.mark.skipif(shutil.which("promtool") is None and not REQUIRED,
                    reason="promtool not installed (Debian: apt-get install prometheus)")
def test_promtool_parses_every_dashboard_expression(tmp_path: Path) -> None:
    # Grafana variables are not PromQL: give them plausible values, then let promtool parse
    # each expression as a recording rule.
    def concrete(expr: str) -> str:
        return expr.replace("$__rate_interval", "5m").replace("$job", "garmexport")

    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr{i}", "expr": concrete(expr)}
        for i, expr in enumerate(dashboard_exprs())]}]}
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_lag_in_seconds_is_the_exported_gauge_not_the_committed_event_time() -> None:
    """A quiet, caught-up partition has an old newest event but no lag (config/METRICS.md)."""
    [panel] = [p for p in panels() if p["title"] == "Lag per partition (seconds)"]
    [target] = panel["targets"]
    assert metric_names(target["expr"]) == {"garmexport_consumer_lag_seconds"}
