"""Compaction reports its outcome to a real Pushgateway and to a textfile.

What Prometheus would scrape from the gateway after each run: a success sets every gauge
and the last success time; a failure (an exception, or files left alone with a problem)
says so and keeps the last success time of the run before; a dry run reports nothing; a
gateway that does not answer costs a logged error, never the run's result.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from garmexport.compaction.job import Summary
from garmexport.compaction.report import JOB, last_success_in, reported
from garmexport.settings.config import CompactionConfig
from tests.pushgateway import Pushgateway, pushed

ROOT = "hdfs://nn:8020/garmadon"


def clock(*times: float):  # noqa: ANN201
    it = iter(times)
    return lambda: next(it)


def value(samples: dict, name: str) -> float:
    [(labels, v)] = samples[name]
    assert labels["root"] == ROOT
    return v


def test_a_success_then_a_failure_as_the_gateway_exposes_them(pushgateway: Pushgateway) -> None:
    cfg = CompactionConfig(pushgateway_url=pushgateway.url)
    done = Summary(days_compacted=3, files_in=120, files_out=4, bytes_in=5_000_000)
    assert reported(cfg, ROOT, False, lambda: done, wall_s=clock(1_000.0)) is done
    first = pushed(pushgateway, JOB)
    assert value(first, "garmexport_compaction_last_run_success") == 1
    assert value(first, "garmexport_compaction_last_run_days_compacted") == 3
    assert value(first, "garmexport_compaction_last_run_files_compacted") == 120
    assert value(first, "garmexport_compaction_last_run_files_written") == 4
    assert value(first, "garmexport_compaction_last_run_bytes_compacted") == 5_000_000
    assert value(first, "garmexport_compaction_last_run_problems") == 0
    succeeded = value(first, "garmexport_compaction_last_success_timestamp_seconds")
    assert 1_000.0 <= succeeded < 1_060.0
    assert value(first, "garmexport_compaction_last_run_timestamp_seconds") == succeeded

    def crash() -> Summary:
        raise RuntimeError("metastore down")

    with pytest.raises(RuntimeError, match="metastore down"):
        reported(cfg, ROOT, False, crash, wall_s=clock(90_000.0))
    second = pushed(pushgateway, JOB)
    assert value(second, "garmexport_compaction_last_run_success") == 0
    assert value(second, "garmexport_compaction_last_run_days_compacted") == 0
    assert value(second, "garmexport_compaction_last_run_timestamp_seconds") >= 90_000.0
    assert value(second, "garmexport_compaction_last_success_timestamp_seconds") == succeeded


def test_files_left_alone_make_a_failed_run_and_a_dry_run_reports_nothing(
        pushgateway: Pushgateway) -> None:
    cfg = CompactionConfig(pushgateway_url=pushgateway.url)
    reported(cfg, ROOT, True, lambda: Summary(days_compacted=54), wall_s=clock(1.0))
    assert pushed(pushgateway, JOB) == {}
    problems = Summary(days_compacted=1, problems=["day=2026-11-01/x.parquet: bad footer"])
    reported(cfg, ROOT, False, lambda: problems, wall_s=clock(2.0))
    samples = pushed(pushgateway, JOB)
    assert value(samples, "garmexport_compaction_last_run_success") == 0
    assert value(samples, "garmexport_compaction_last_run_problems") == 1
    assert "garmexport_compaction_last_success_timestamp_seconds" not in samples


def test_a_gateway_that_refuses_or_is_gone_is_logged_and_the_run_keeps_its_result(
        pushgateway: Pushgateway, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    done = Summary(days_compacted=1)
    for url in (f"{pushgateway.url}/wrong-path", f"http://127.0.0.1:{closed}"):
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            assert reported(CompactionConfig(pushgateway_url=url), ROOT, False, lambda: done) is done
        assert [r.getMessage() for r in caplog.records] == ["compaction_report_failed"], url
    assert pushed(pushgateway, JOB) == {}


def test_the_textfile_keeps_the_last_success_through_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "garmexport_compaction.prom"
    cfg = CompactionConfig(metrics_textfile=str(path))
    reported(cfg, ROOT, False, lambda: Summary(days_compacted=2), wall_s=clock(1_000.0))
    succeeded = last_success_in(str(path))
    assert succeeded is not None and succeeded >= 1_000.0

    def store_fails() -> Summary:
        raise OSError("disk")

    with pytest.raises(OSError):
        reported(cfg, ROOT, False, store_fails, wall_s=clock(90_000.0))
    text = path.read_text()
    assert "garmexport_compaction_last_run_success 0.0" in text
    assert last_success_in(str(path)) == succeeded
