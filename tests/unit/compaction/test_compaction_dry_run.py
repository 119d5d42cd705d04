"""``compact --dry-run`` reports what its plan holds (no Spark: a dry run writes nothing),
and only reads: no lease taken (issue 40: it left ``_compaction/_lease/0000000002.json`` and
waited for a running compaction), nothing recovered."""

from __future__ import annotations

import io
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from garmexport.observe import logs
from garmexport.compaction.fs import LocalFs
from garmexport.compaction.job import CompactOptions, run
from garmexport.compaction.lease import Lease
from garmexport.compaction.names import staging_path
from garmexport.protocol.naming import MS_PER_DAY, day_number
from tests.spark.exporter_like import data_files, markers_for, tree, write_day

DAYS = [f"2026-10-{d:02d}" for d in range(1, 31)]
NOW_MS = (day_number("2026-11-01") + 3) * MS_PER_DAY


def test_a_dry_run_over_many_days_counts_every_planned_day_and_changes_nothing(
        tmp_path: Path) -> None:
    root = str(tmp_path / "out")
    for i, day in enumerate(DAYS):
        for output in ("fs", "gc"):
            write_day(root, output, day, partitions=2, files_per_partition=3,
                      rows_per_file=2, first_offset=i * 100)
    markers_for(root, {p: {"fs": 10**6, "gc": 10**6} for p in range(2)}, NOW_MS)
    before = {d: data_files(root, "fs", d) for d in DAYS}
    stream = io.StringIO()
    root_logger = logging.getLogger()
    handlers, level = list(root_logger.handlers), root_logger.level
    logs.configure("json", "INFO", stream)
    try:
        summary = run(None, LocalFs(root),
                      CompactOptions(root_uri=LocalFs(root).uri, lateness_s=3600.0,
                                     target_file_bytes=1 << 30, sort_columns=(), codec="zstd",
                                     dry_run=True), NOW_MS)
    finally:
        root_logger.handlers[:] = handlers
        root_logger.setLevel(level)
    planned = [e for e in map(json.loads, stream.getvalue().splitlines())
               if e["event"] == "compaction_day_planned" and e["outputs"]]
    assert len(planned) == 2 * len(DAYS) == summary.days_compacted
    assert summary.files_in == sum(e["inputs"] for e in planned) == 2 * len(DAYS) * 6
    assert summary.files_out == 2 * len(DAYS) and summary.rows == 2 * len(DAYS) * 12
    line = summary.line(dry_run=True)
    assert line.startswith(f"compaction dry run: {2 * len(DAYS)} days planned, files "
                           f"{summary.files_in} -> {summary.files_out}"), line
    assert {d: data_files(root, "fs", d) for d in DAYS} == before
    # the log line names the figures as the summary does: planned, not done (issue 32,
    # item 8: it said days_compacted and bytes_out=0 for a run that wrote nothing)
    [done] = [e for e in map(json.loads, stream.getvalue().splitlines())
              if e["event"] == "compaction_done"]
    assert done["dry_run"] is True and done["days_to_compact"] == summary.days_compacted
    assert done["files_to_compact"] == summary.files_in, done
    assert not {"days_compacted", "bytes_out", "complete_written"} & set(done), done


@pytest.mark.parametrize("running", [False, True], ids=["alone", "beside-a-compaction"])
def test_a_dry_run_takes_no_lease_and_leaves_the_root_byte_for_byte_as_it_was(
        tmp_path: Path, running: bool) -> None:
    root = str(tmp_path / "out")
    days = DAYS[:3]
    for i, day in enumerate(days):
        write_day(root, "fs", day, partitions=2, files_per_partition=3, rows_per_file=2,
                  first_offset=i * 100)
    markers_for(root, {p: {"fs": 10**6} for p in range(2)}, NOW_MS)
    fs = LocalFs(root)
    # a compaction at work on the first day: Spark writing its staging dir (a recovery
    # would take it for a killed run's and delete it)
    staging = Path(root) / staging_path("fs", days[0], 1)
    staging.mkdir(parents=True)
    (staging / "part-00000.parquet").write_bytes(b"being written")
    holder = Lease(fs, "running-compaction", lease_s=3600, renew_s=3600)
    if running:
        holder.hold(0)
    try:
        before = tree(root)
        summary = run(None, fs, CompactOptions(
            root_uri=fs.uri, lateness_s=3600.0, target_file_bytes=1 << 30, sort_columns=(),
            codec="zstd", dry_run=True, lease_wait_s=2.0), NOW_MS)
        assert tree(root) == before
    finally:
        holder.release()
    # the day being swapped is not planned, and said to be: the others are
    assert (summary.swaps_pending, summary.days_compacted) == (1, len(days) - 1), summary
    assert "1 days not planned for an unfinished swap" in summary.line(dry_run=True)
    assert summary.as_dict(dry_run=True)["swaps_pending"] == 1
    assert summary.rolled_back == 0


#: runs "$@" with the directory "$1" mounted read-only, in a mount namespace of its own
READ_ONLY = ('mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && '
             'exec "$@"')

PLAN = """
import sys
from garmexport.compaction.fs import LocalFs
from garmexport.compaction.job import CompactOptions, run
fs = LocalFs(sys.argv[1])
summary = run(None, fs, CompactOptions(root_uri=fs.uri, lateness_s=3600.0,
              target_file_bytes=1 << 30, sort_columns=(), codec="zstd", dry_run=True),
              int(sys.argv[2]))
print(summary.line(dry_run=True))
"""


def test_a_dry_run_plans_a_read_only_root(tmp_path: Path) -> None:
    root = str(tmp_path / "out")
    for i, day in enumerate(DAYS[:2]):
        write_day(root, "fs", day, partitions=2, files_per_partition=3, rows_per_file=2,
                  first_offset=i * 100)
    markers_for(root, {p: {"fs": 10**6} for p in range(2)}, NOW_MS)
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "-m", "sh", "-c", READ_ONLY, "sh", root,
                            "sh", "-c", "! touch \"$0/probe\"", root],
                           capture_output=True, text=True) if unshare else None
    if probe is None or probe.returncode != 0:
        pytest.skip("no read-only bind mount here (needs unshare -m and mount as root): "
                    f"{probe.stderr.strip() if probe else 'unshare not installed'}")
    done = subprocess.run([unshare, "-m", "sh", "-c", READ_ONLY, "sh", root, sys.executable,
                           "-c", PLAN, root, str(NOW_MS)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("compaction dry run: 2 days planned, files 12 -> 2"), \
        done.stdout
