"""``python -m garmexport compact`` as an operator runs it: what it prints, and only that.

Spark's JVM is started by garmexport with its output relayed (``spark_logs``): by default
none of Spark's or Hive's harmless WARN lines, no progress bar, no raw JVM line; asked for
with ``--spark-log-level WARN``, they come as garmexport lines.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from garmexport.compaction.fs import LocalFs
from garmexport.compaction.lease import Lease
from garmexport.protocol.naming import MS_PER_DAY
from tests.spark.exporter_like import markers_for, tree, write_day

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
# <ts> <LEVEL> <logger> <event> ...: garmexport's text line (garmexport/observe/logs.py)
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "
                       r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+ \S+")


def many_days(root: Path, days: int) -> list[str]:
    """``days`` closed UTC days of raw files (the clock is the wall clock: the CLI reads it)."""
    today = int(time.time() * 1000) // MS_PER_DAY
    names = [time.strftime("%Y-%m-%d", time.gmtime((today - 5 - i) * 86400))
             for i in range(days)]
    for i, day in enumerate(names):
        write_day(str(root), "fs", day, partitions=2, files_per_partition=3, rows_per_file=3,
                  first_offset=i * 100)
    markers_for(str(root), {p: {"fs": 10**6} for p in range(2)}, int(time.time() * 1000))
    return names


def compact(tmp_path: Path, root: Path, *args: str, **env_vars: str,
            ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GARMEXPORT_")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(REPO),
               GARMEXPORT_OUTPUT_ROOT=str(root), GARMEXPORT_COMPACTION_LATENESS_S="3600",
               GARMEXPORT_COMPACTION_RETIRED_GRACE_S="0",  # swaps end within the run
               **env_vars)
    # cwd: the embedded Derby metastore and the warehouse land in the working directory
    return subprocess.run([sys.executable, "-m", "garmexport", "compact", *args], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_a_dry_run_prints_the_days_it_planned_and_nothing_from_spark(tmp_path: Path) -> None:
    days = many_days(tmp_path / "out", 24)
    # beside a running compaction (its lease held by this process): the dry run neither
    # waits for it nor writes a byte (issue 40: it took and released the lease)
    holder = Lease(LocalFs(str(tmp_path / "out")), "running-compaction", lease_s=3600,
                   renew_s=3600).hold(0)
    try:
        before = tree(str(tmp_path / "out"))
        done = compact(tmp_path, tmp_path / "out", "--dry-run")
        assert tree(str(tmp_path / "out")) == before
    finally:
        holder.release()
    assert done.returncode == 0, done.stderr[-3000:]
    planned = [line for line in done.stderr.splitlines()
               if " compaction_day_planned " in line and " outputs=0 " not in line]
    assert len(planned) == len(days)
    assert done.stdout.strip().startswith(f"compaction dry run: {len(days)} days planned"), \
        done.stdout
    # every line is garmexport's own; none comes from Spark (JVM or py4j)
    foreign = [line for line in done.stderr.splitlines() if not TEXT_LINE.match(line)
               or " garmexport.compaction.spark_logs " in line or " py4j" in line]
    assert foreign == [], foreign[:10]


def test_a_dry_runs_json_summary_says_what_it_would_compact_and_days_are_dates(
        tmp_path: Path) -> None:
    days = many_days(tmp_path / "out", 3)
    done = compact(tmp_path, tmp_path / "out", "--dry-run", "--no-hive",
                   GARMEXPORT_LOG_FORMAT="json")
    assert done.returncode == 0, done.stderr[-3000:]
    [summary] = [json.loads(line) for line in done.stdout.splitlines()]
    assert summary["event"] == "compaction_summary" and summary["dry_run"] is True
    # nothing was compacted: the numbers are what would be, under names that say so
    assert "days_compacted" not in summary and "bytes_out" not in summary, summary
    assert summary["days_to_compact"] == len(days) == 3, summary
    assert summary["files_to_compact"] == 3 * 2 * 3, summary  # days x partitions x files
    [start] = [e for e in map(json.loads, done.stderr.splitlines())
               if e["event"] == "compaction_start"]
    # every day written is closed; the last closed day is a date, not an day number number
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", start["last_closed_day"]), start
    assert start["last_closed_day"] >= max(days), start


def test_spark_warnings_asked_for_come_as_garmexport_lines(tmp_path: Path) -> None:
    many_days(tmp_path / "out", 2)
    done = compact(tmp_path, tmp_path / "out", "--spark-log-level", "warn")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert [line for line in lines if not TEXT_LINE.match(line)] == []  # no raw JVM line
    spark = [line for line in lines if " garmexport.compaction.spark_logs spark_log " in line]
    assert spark and all(" WARNING " in line or " ERROR " in line for line in spark), spark
    assert any("jvm_logger=" in line and "message=" in line for line in spark)
    assert done.stdout.startswith("compaction: 2 days"), done.stdout
