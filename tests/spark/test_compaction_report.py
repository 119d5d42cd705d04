"""``garmexport compact`` pushes the outcome of a real run to a real Pushgateway.

A small closed day (30 files) is compacted by the command an operator runs, with the
gateway named only in the environment (``GARMEXPORT_COMPACTION_PUSHGATEWAY_URL``); what
the gateway then exposes must match the run's own summary line.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from garmexport.storage.hadoop_uri import spark_root
from garmexport.compaction.report import JOB
from tests.integration.harness import PYTHON, ROOT as REPO
from tests.pushgateway import Pushgateway, pushed
from tests.spark.test_compaction import small_day

pytestmark = pytest.mark.spark


def test_a_compaction_run_reports_what_its_summary_says(pushgateway: Pushgateway,
                                                         tmp_path: Path) -> None:
    root = str(tmp_path / "out")
    small_day(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GARMEXPORT_")}
    env.update({"GARMEXPORT_OUTPUT_ROOT": root, "GARMEXPORT_COMPACTION_LATENESS_S": "3600",
                "GARMEXPORT_COMPACTION_RETIRED_GRACE_S": "0",  # swaps end within the run
                "GARMEXPORT_COMPACTION_SPARK_MASTER": "local[1]",
                "GARMEXPORT_COMPACTION_PUSHGATEWAY_URL": pushgateway.url,
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYTHONPATH": os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])})
    started = time.time()
    done = subprocess.run(
        [PYTHON, "-m", "garmexport", "compact", "--no-hive",
         "--sort-columns", "kafka_partition,kafka_offset"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = re.search(r"compaction: (\d+) days, files (\d+) -> (\d+)", done.stdout)
    assert line, done.stdout
    days, files_in, files_out = map(int, line.groups())
    assert (days, files_in) == (1, 30)
    samples = pushed(pushgateway, JOB)
    got = {name: v for name, [(labels, v)] in samples.items()
           if name.startswith("garmexport_compaction_") and labels["root"] == spark_root(root)}
    assert got["garmexport_compaction_last_run_success"] == 1
    assert got["garmexport_compaction_last_run_days_compacted"] == days
    assert got["garmexport_compaction_last_run_files_compacted"] == files_in
    assert got["garmexport_compaction_last_run_files_written"] == files_out
    assert started <= got["garmexport_compaction_last_success_timestamp_seconds"] <= time.time()
    assert 0 < got["garmexport_compaction_last_run_duration_seconds"] < time.time() - started
