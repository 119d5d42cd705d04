"""``compact --dry-run`` reports what its plan holds (no Spark: a dry run writes nothing)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

from garmexport.observe import logs
from garmexport.compaction.fs import LocalFs
from garmexport.compaction.job import CompactOptions, run
from garmexport.protocol.naming import MS_PER_DAY, epoch_day
from tests.spark.exporter_like import data_files, markers_for, write_day

DAYS = [f"2026-10-{d:02d}" for d in range(1, 31)]
NOW_MS = (epoch_day("2026-11-01") + 3) * MS_PER_DAY


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
