"""Compaction and repair are runs of one swap driver: a repair killed at any swap step (the
process crash hook, TEST_GARMEXPORT_CRASH_AFTER) leaves a state that the next repair and
the next compaction finish alike; a repair deletes retired views as compaction does; both
wait for the one lease."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from garmexport.compaction import retired
from garmexport.compaction.fs import LocalFs
from garmexport.compaction.job import CompactOptions, run as compact
from garmexport.compaction.lease import Lease
from garmexport.compaction.names import COMPACTION_DIR, LEASE_DIR
from garmexport.compaction.swap import STEPS
from garmexport.errors import LeaseLost
from garmexport.process.crash_hooks import CRASH_ENV
from garmexport.repair.swap import SwapOptions, run as repair
from tests.spark.exporter_like import read_rows, tree, write_day

DAY = "2026-11-01"
NOW_MS = 1_800_000_000_000
#: a killed run's lease lapses at once for the next one
LEASE_S = 0.2
#: a repair of DAY that takes out the first row of its first file and of its last file
#: (two inputs, one of them deleted whole when it has one row: here each has three)
REPAIR = """
import sys
from collections import Counter

import pyarrow.parquet as pq

from garmexport.compaction.fs import LocalFs
from garmexport.repair.swap import SwapOptions, run

root, day = sys.argv[1], sys.argv[2]
fs = LocalFs(root)
files = sorted(e.name for e in fs.list(f"fs/day={day}") if e.name.endswith(".parquet"))
drops = {}
for name in (files[0], files[-1]):
    path = f"fs/day={day}/{name}"
    t = pq.read_table(f"{root}/{path}", columns=["kafka_partition", "kafka_offset"])
    drops[path] = Counter({(t["kafka_partition"][0].as_py(), t["kafka_offset"][0].as_py()): 1})
done = run(fs, None, SwapOptions("zstd", 0.0, 0.0, 0.1, 5.0, lease_s=%r),
           lambda: ({("fs", day): drops}, {}), print)
print("days", done.days)
""" % LEASE_S


def _root(tmp_path: Path) -> tuple[str, list[tuple[int, int]]]:
    root = str(tmp_path / "out")
    rows = write_day(root, "fs", DAY, partitions=2, files_per_partition=2, rows_per_file=3)
    return root, rows


def _repair_process(root: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", REPAIR, root, DAY], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env},
                          cwd=str(Path(__file__).resolve().parents[3]))


def _without_leases(root: str) -> dict[str, str]:
    """The root's files and directories but the lease's (an owner id per run)."""
    return {p: h for p, h in tree(root).items() if not p.startswith(LEASE_DIR)}


@pytest.fixture(scope="module")
def repaired(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list]:
    """The root after a repair that nothing killed, and its rows."""
    root, _ = _root(tmp_path_factory.mktemp("whole"))
    done = _repair_process(root, {})
    assert done.returncode == 0 and "days 1" in done.stdout, done.stderr
    return _without_leases(root), read_rows(root, "fs", DAY)


# a swap without a metastore view reaches these steps (the view's are for Hive)
PLAIN_STEPS = [s for s in STEPS if "view" not in s and "flip" not in s and s != "waiting"]


@pytest.mark.parametrize("step", PLAIN_STEPS)
def test_a_repair_killed_at_a_swap_step_is_finished_alike_by_a_repair_and_a_compaction(
        tmp_path: Path, step: str, repaired: tuple[dict[str, str], list]) -> None:
    root, rows = _root(tmp_path)
    killed = _repair_process(root, {CRASH_ENV: step})
    assert killed.returncode == 137, (killed.stdout, killed.stderr)
    assert any(e for e in LocalFs(root).list(f"{COMPACTION_DIR}/fs")), "nothing to recover"
    other = str(tmp_path / "copy")
    shutil.copytree(root, other)

    # the next repair (nothing left to take out) and the next compaction (no closed day:
    # no marker, so no Spark) recover through the same driver
    by_repair = repair(LocalFs(root), None, SwapOptions("zstd", 0.0, 0.0, 0.1, 5.0, LEASE_S),
                       lambda: ({}, {}), lambda line: None)
    by_compaction = compact(None, LocalFs(other), CompactOptions(
        root_uri=LocalFs(other).uri, lateness_s=0.0, target_file_bytes=1 << 30,
        sort_columns=(), codec="zstd", hive=False, grace_s=0.0, lease_wait_s=5.0,
        lease_s=LEASE_S), NOW_MS)
    assert _without_leases(root) == _without_leases(other)
    committed = step != "before-journal"
    assert by_repair.recovered == by_compaction.rolled_forward == int(committed)
    assert by_compaction.rolled_back == int(not committed)
    if committed:  # the swap is finished: the day is the one a whole repair leaves
        assert _without_leases(root) == repaired[0]
        assert read_rows(root, "fs", DAY) == repaired[1] != sorted(rows)
    else:  # undone: the day as it was
        assert read_rows(root, "fs", DAY) == sorted(rows)
        assert not LocalFs(root).list(f"{COMPACTION_DIR}/fs/day={DAY}")


def test_a_repair_deletes_the_views_retired_longer_ago_than_the_grace(tmp_path: Path) -> None:
    root, _ = _root(tmp_path)
    fs = LocalFs(root)
    for g, at_ms in ((1, NOW_MS - 20_000), (2, NOW_MS - 1_000)):
        view = f"fs/day={DAY}/_g{g}"
        fs.write(f"{view}/part.parquet", b"x")
        retired.record(fs, "fs", DAY, g, view, at_ms)
    done = repair(fs, None, SwapOptions("zstd", 0.0, 10.0, 0.1, 5.0, LEASE_S),
                  lambda: ({}, {}), lambda line: None, clock=lambda: NOW_MS)
    assert done.views_deleted == 1
    names = {e.name for e in fs.list(f"fs/day={DAY}")}
    assert "_g1" not in names and "_g2" in names  # g2's grace is not over


def test_a_repair_and_a_compaction_wait_for_the_one_lease(tmp_path: Path) -> None:
    root, _ = _root(tmp_path)
    fs = LocalFs(root)
    with Lease(fs, "running", lease_s=3600, renew_s=3600).hold(0):
        with pytest.raises(LeaseLost, match="running"):
            repair(fs, None, SwapOptions("zstd", 0.0, 0.0, 0.1, 0.0), lambda: ({}, {}),
                   lambda line: None)
        with pytest.raises(LeaseLost, match="running"):
            compact(None, fs, CompactOptions(root_uri=fs.uri, lateness_s=0.0,
                                             target_file_bytes=1 << 30, sort_columns=(),
                                             codec="zstd", hive=False, lease_wait_s=0.0),
                    NOW_MS)
