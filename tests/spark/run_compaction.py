"""Compaction runs in their own process, for the tests that kill them (SIGKILL, crash hook).

Usage: ``python -m tests.spark.run_compaction ROOT WORKDIR NOW_MS TARGET_BYTES
[METASTORE_URI DATABASE [GRACE_S]]``: one run. Without a metastore server Hive is off (the
test's own session holds the embedded metastore) and the file side is what a kill can
break; with one, the run flips the partitions of ``DATABASE`` as ``compact`` does, and waits
``GRACE_S`` (default 0) after each flip before it changes the day directory, sweeping new
files into the view every 0.5 s. Prints ``starting``, then each swap step as it is reached,
so a test can time a kill, then the run's summary line.

``python -m tests.spark.run_compaction --serve WORKDIR METASTORE_URI REQUESTS``: one Spark
session for many runs, each asked for by a file ``REQUESTS/<n>.json`` (``{"root", "now_ms",
"target", "database", "grace_s"}``, and ``"pause": true`` to stop at every swap step:
:data:`~garmexport.process.crash_hooks.PAUSE_AT_EVERY_STEP`; ``{"stop": true}`` ends the loop), printing into
``<n>.out`` what a single run prints, its log (JSON lines) into ``<n>.log``, and leaving its
exit status in ``<n>.code``; with
``"before_spark": true`` the run is ``compact``'s: the swaps are first recovered without
Spark (:func:`~garmexport.compaction.before_spark.finish_swaps`), then the step
``spark-start`` stands for Spark's start-up (the session is up already), then the run,
whose summary counts what the first part recovered. It is the
retry of a killed run in ``tests/spark/test_swap_readers.py``: what the retry must repair
is on disk and in the metastore, not in the killed process, and a Spark JVM start is the
largest cost of that test (a fresh session per retry took 12 of its starts).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from garmexport.cli.compact import counted
from garmexport.compaction.before_spark import finish_swaps
from garmexport.compaction.fs import LocalFs
from garmexport.compaction.job import CompactOptions, run
from garmexport.compaction.recover import Recovered
from garmexport.compaction.spark_job import build_session
from garmexport.compaction.swap import crash_point
from garmexport.process.crash_hooks import CRASH_ENV, PAUSE_AT_EVERY_STEP, hook
from garmexport.hive.tables import TableNaming
from garmexport.observe.logs import configure
from tests.spark.conftest import local_spark_conf


#: where the retry's Spark would start (the session is up already): a step of this harness
SPARK_START = "spark-start"
#: the runs' lease: a retry waits this long at most for a killed run's (20 s shipped); still
#: four renewals long, so a live run under load keeps it
LEASE_S = 8.0


def session(workdir: str, metastore_uri: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = build_session("local[1]", metastore_uri, local_spark_conf(workdir))
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def compact_once(spark: Any, out: TextIO, root: str, now_ms: int, target: int,
                 hive: bool, database: str, grace_s: float, metastore_uri: str = "") -> None:
    """One run over ``root``, printing ``starting``, each swap step and the summary; with
    ``metastore_uri``, first the recovery ``compact`` makes before it starts Spark."""
    fs = LocalFs(root)
    opts = CompactOptions(root_uri=fs.uri, lateness_s=3600.0, target_file_bytes=target,
                          sort_columns=("kafka_partition", "kafka_offset"), codec="zstd",
                          hive=hive, tables=TableNaming(database or TableNaming.database),
                          grace_s=grace_s, sweep_every_s=0.5, lease_s=LEASE_S)

    def crash(step: str) -> None:
        print(step, file=out, flush=True)
        if step == SPARK_START:  # this harness's own step, not one of the swap's
            hook(step, (SPARK_START,))
        else:
            crash_point(step)

    early = Recovered(0, 0)
    if metastore_uri:
        early = finish_swaps(fs.uri, root, None, metastore_uri, 30.0, opts.tables,
                             opts.lease_wait_s, now_ms, grace_s, crash)
        crash(SPARK_START)
    print("starting", file=out, flush=True)
    summary = counted(run(spark, fs, opts, now_ms, crash), early)
    print(summary.line(), file=out, flush=True)


def main(root: str, workdir: str, now_ms: str, target: str, metastore_uri: str = "",
         database: str = "", grace_s: str = "0") -> None:
    spark = session(workdir, metastore_uri)
    compact_once(spark, sys.stdout, root, int(now_ms), int(target), bool(metastore_uri),
                 database, float(grace_s))
    spark.stop()


def serve(workdir: str, metastore_uri: str, requests: str) -> None:
    spark = session(workdir, metastore_uri)
    print("ready", flush=True)
    n = 0
    while True:
        request = Path(requests, f"{n}.json")
        while not request.exists():
            time.sleep(0.05)
        doc = json.loads(request.read_text())
        if doc.get("stop"):
            break
        code = 0
        if doc.get("pause"):
            os.environ[CRASH_ENV] = PAUSE_AT_EVERY_STEP
        with open(Path(requests, f"{n}.out"), "w") as out, \
                open(Path(requests, f"{n}.log"), "w") as log:
            configure("json", "INFO", stream=log)
            logging.getLogger("py4j").setLevel(logging.WARNING)
            try:
                compact_once(spark, out, doc["root"], int(doc["now_ms"]), int(doc["target"]),
                             True, doc["database"], float(doc["grace_s"]),
                             metastore_uri if doc.get("before_spark") else "")
            except Exception:  # noqa: BLE001 - the test reads the traceback from the output
                print(traceback.format_exc(), file=out, flush=True)
                code = 1
            finally:
                os.environ.pop(CRASH_ENV, None)
                configure("text", "WARNING")  # the file closes: back to stderr
        done = Path(requests, f"{n}.code.tmp")
        done.write_text(str(code))
        os.replace(done, Path(requests, f"{n}.code"))
        n += 1
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
