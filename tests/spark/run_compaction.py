"""A compaction run in its own process, for the tests that kill it (SIGKILL, crash hook).

Usage: ``python -m tests.spark.run_compaction ROOT WORKDIR NOW_MS TARGET_BYTES
[METASTORE_URI DATABASE [GRACE_S]]``. Without a metastore server Hive is off (the test's
own session holds the embedded metastore) and the file side is what a kill can break; with
one, the run flips the partitions of ``DATABASE`` as ``compact`` does, and waits
``GRACE_S`` (default 0) after each flip before it changes the day directory, sweeping new
files into the view every 0.5 s. Prints ``starting``, then
each swap step as it is reached, so a test can time a kill.
"""

from __future__ import annotations

import os
import sys

from garmexport.compaction.fs import LocalFs
from garmexport.compaction.job import CompactOptions, run
from garmexport.compaction.spark_job import build_session
from garmexport.compaction.swap import crash_point
from garmexport.hive.tables import TableNaming
from tests.spark.conftest import local_spark_conf


def main(root: str, workdir: str, now_ms: str, target: str, metastore_uri: str = "",
         database: str = "", grace_s: str = "0") -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = build_session("local[1]", metastore_uri, local_spark_conf(workdir))
    spark.sparkContext.setLogLevel("ERROR")
    fs = LocalFs(root)
    opts = CompactOptions(root_uri=fs.uri, lateness_s=3600.0, target_file_bytes=int(target),
                          sort_columns=("kafka_partition", "kafka_offset"), codec="zstd",
                          hive=bool(metastore_uri),
                          tables=TableNaming(database or TableNaming.database),
                          grace_s=float(grace_s), sweep_every_s=0.5)

    def crash(step: str) -> None:
        print(step, flush=True)
        crash_point(step)

    print("starting", flush=True)
    summary = run(spark, fs, opts, int(now_ms), crash)
    print(summary.line(), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
