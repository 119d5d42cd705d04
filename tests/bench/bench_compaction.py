"""Compaction throughput: the Spark local job vs a plain pyarrow rewrite of the same files.

Run ``python tests/bench/bench_compaction.py [--files N] [--rows R] [--target-mb M]``.
Builds one closed day of N small exporter-like files (R rows each, 4 Kafka partitions) and
copies it, then compacts one copy with the Spark job (``garmexport.compaction.job.run``:
recover, scan footers, plan, Spark write, journaled swap; Hive off) and rewrites the other
copy with pyarrow following the same plan (read the inputs of each output, sort, write
zstd). Prints rows/s and input MB/s of each, and Spark / pyarrow. Session start-up of
Spark is reported apart: it is paid once per run, not per day.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from garmexport.compaction.fs import LocalFs  # noqa: E402
from garmexport.compaction.job import CompactOptions, run  # noqa: E402
from garmexport.compaction.plan import plan_day  # noqa: E402
from garmexport.compaction.scan import scan_day  # noqa: E402
from garmexport.compaction.spark_job import build_session  # noqa: E402
from garmexport.protocol.naming import MS_PER_DAY, day_number  # noqa: E402
from tests.spark.conftest import local_spark_conf  # noqa: E402
from tests.spark.exporter_like import markers_for, write_day  # noqa: E402

DAY = "2026-11-01"
SORT = ("kafka_partition", "kafka_offset")
NOW_MS = (day_number(DAY) + 2) * MS_PER_DAY


def pyarrow_rewrite(root: str, target: int) -> int:
    """Rewrite the day following the same plan with pyarrow only; returns output files."""
    fs = LocalFs(root)
    files, names, _ = scan_day(fs, "fs", DAY)
    w = {("local", "garmadon", p): 10**12 for p in range(4)}
    plan = plan_day("fs", DAY, files, w, 1, target)
    base = os.path.join(root, "fs", f"day={DAY}")
    for out in plan.outputs:
        tables = [pq.read_table(os.path.join(base, f.name)) for f in out.inputs]
        table = pa.concat_tables(tables, promote_options="default")
        table = table.sort_by([(c, "ascending") for c in SORT])
        pq.write_table(table, os.path.join(base, "_" + out.name.format()), compression="zstd")
    return len(plan.outputs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=200, help="rows per small file")
    ap.add_argument("--target-mb", type=float, default=4.0)
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    tmp = tempfile.mkdtemp(prefix="bench-compaction-")
    try:
        a, b = os.path.join(tmp, "spark"), os.path.join(tmp, "arrow")
        per_partition = max(1, args.files // 4)
        rows = len(write_day(a, "fs", DAY, 4, per_partition, args.rows))
        markers_for(a, {p: {"fs": 10**12} for p in range(4)}, NOW_MS)
        shutil.copytree(a, b)
        day = os.path.join(a, "fs", f"day={DAY}")
        mb = sum(os.path.getsize(os.path.join(day, n)) for n in os.listdir(day)) / 2**20
        target = int(args.target_mb * 2**20)
        print(f"day: {4 * per_partition} files, {rows} rows, {mb:.1f} MiB; target "
              f"{args.target_mb} MiB")

        t0 = time.perf_counter()
        spark = build_session("local[2]", "", local_spark_conf(os.path.join(tmp, "ss")))
        spark.sparkContext.setLogLevel("ERROR")
        startup = time.perf_counter() - t0
        opts = CompactOptions(root_uri=LocalFs(a).uri, lateness_s=0.0, grace_s=0.0,
                              target_file_bytes=target,
                              sort_columns=SORT, codec="zstd", hive=False)
        t0 = time.perf_counter()
        summary = run(spark, LocalFs(a), opts, NOW_MS)
        spark_s = time.perf_counter() - t0
        spark.stop()

        t0 = time.perf_counter()
        arrow_outputs = pyarrow_rewrite(b, target)
        arrow_s = time.perf_counter() - t0

        print(f"spark session start: {startup:.1f} s")
        for label, secs, outs in (("spark local[2]", spark_s, summary.files_out),
                                  ("pyarrow", arrow_s, arrow_outputs)):
            print(f"{label:>15}: {secs:6.2f} s  {rows / secs:10.0f} rows/s  "
                  f"{mb / secs:7.2f} MiB/s  {outs} files")
        print(f"spark / pyarrow throughput: {arrow_s / spark_s:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
