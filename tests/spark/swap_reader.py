"""A reader of one day in a loop, in its own process, as a dashboard would read it.

Usage: ``python -m tests.spark.swap_reader METASTORE_URI WORKDIR MANIFEST SAMPLES``.
Each loop reads the JSON ``MANIFEST`` (``{"tag", "root", "database", "table", "day",
"keys": [[partition, offset], ...]}``, rewritten by the test between cases; ``{}``: idle;
a ``stop`` key ends the loop), then samples the day three ways and appends one JSON line
per way to ``SAMPLES``:

- ``metastore``: ``SELECT kafka_partition, kafka_offset FROM database.table WHERE day``
  through Spark SQL on the metastore server (the session lists a partition's files per
  query, as the README tells Spark Thrift Server users to configure it);
- ``path``: the day directory read with pyarrow (hidden names skipped, as Spark does);
- ``complete``: whether ``_COMPLETE`` stands, and if so whether the day's visible files
  are exactly the ones it names.

Each line has the tag, the way, ``dup`` (keys seen more than once), ``missing`` (expected
keys not seen), ``extra`` (keys seen that are not expected) or ``error`` (the read
failed), and the time; with ``"seen": true`` in the manifest, a metastore line also lists
the keys it saw (``seen``), for a day that grows while it is read.

A loop starts at most every :data:`INTERVAL_S`: a reader that never paused sampled every
0.4 s on an idle machine (122 metastore samples in a 49 s case) and so kept one of the two
cores busy through the whole module, which every test running beside it paid for. What the
tests sample are the states a kill leaves, which stand until the retry, and the retry's
swap, whose view stands for its grace (10 s): each is still sampled several times.

The path and ``_COMPLETE`` ways are sampled every loop (they cost a few milliseconds, and
the tests time from them when the day directory turned exact again). A metastore query
costs the reader's JVM about 0.6 s of CPU (measured on an idle machine: 55 samples in
60 s, 33 s of CPU), so it runs every loop only while the test waits for samples (the file
``MANIFEST.dense`` exists: :meth:`tests.spark.test_swap_readers.Reader.wait`), and every
:data:`BACKGROUND_S` otherwise: the states the tests wait in are sampled as densely as
before, the moments between them a little under half as often.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

import pyarrow.parquet as pq

from garmexport.compaction import complete
from garmexport.compaction.fs import LocalFs
from garmexport.compaction.spark_job import build_session
from tests.spark.conftest import local_spark_conf


def judge(seen: list[tuple[int, int]], want: set[tuple[int, int]]) -> dict[str, int]:
    counts = Counter(seen)
    return {"dup": sum(n - 1 for n in counts.values() if n > 1),
            "missing": len(want - set(counts)), "extra": len(set(counts) - want)}


def _nulls_first(key: tuple[int | None, int]) -> tuple[bool, int, int]:
    """Sort order of a (partition, offset) whose partition may be NULL (a JVM row)."""
    return (key[0] is not None, key[0] or 0, key[1])


def sample(spark: object, m: dict, out: object, metastore: bool = True) -> None:
    want = {tuple(k) for k in m["keys"]}
    day_dir = os.path.join(m["root"], m["output"], f"day={m['day']}")
    lines = []
    if metastore:
        try:
            rows = spark.sql(  # type: ignore[attr-defined]
                f"SELECT kafka_partition, kafka_offset FROM `{m['database']}`.`{m['table']}` "
                f"WHERE day = '{m['day']}'").collect()
            seen = [(r[0], r[1]) for r in rows]
            listed = {"seen": sorted(seen, key=_nulls_first)} if m.get("seen") else {}
            lines.append({"way": "metastore", **judge(seen, want), **listed})
        except Exception as exc:  # noqa: BLE001 - a failed query is what the test counts
            lines.append({"way": "metastore", "error": str(exc).splitlines()[0][:300]})
    try:
        t = pq.read_table(day_dir, columns=["kafka_partition", "kafka_offset"],
                          partitioning=None)
        seen = list(zip(t["kafka_partition"].to_pylist(), t["kafka_offset"].to_pylist()))
        lines.append({"way": "path", **judge(seen, want)})
    except Exception as exc:  # noqa: BLE001
        lines.append({"way": "path", "error": str(exc).splitlines()[0][:300]})
    fs = LocalFs(m["root"])
    doc = complete.read_complete(fs, m["output"], m["day"])
    if doc is not None:
        names = [e.name for e in fs.list(f"{m['output']}/day={m['day']}") if not e.is_dir]
        lines.append({"way": "complete", "current": complete.is_current(doc, names),
                      "rows": doc["rows"], "want": len(want)})
    now = time.time()
    for line in lines:
        out.write(json.dumps({"tag": m["tag"], "t": now, **line}) + "\n")  # type: ignore[attr-defined]
    out.flush()  # type: ignore[attr-defined]


#: the least time from one loop's start to the next's
INTERVAL_S = 1.0
#: the least time between two metastore samples while no test waits for them
BACKGROUND_S = 2.5


def main(metastore_uri: str, workdir: str, manifest: str, samples: str) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = {**local_spark_conf(workdir),
            "spark.sql.hive.filesourcePartitionFileCacheSize": "0"}
    spark = build_session("local[1]", metastore_uri, conf, app_name="swap-reader")
    spark.sparkContext.setLogLevel("ERROR")
    dense = manifest + ".dense"
    last_metastore = float("-inf")
    with open(samples, "a") as out:
        out.write(json.dumps({"ready": True}) + "\n")
        out.flush()
        while True:
            try:
                with open(manifest) as f:
                    m = json.load(f)
            except (OSError, ValueError):
                m = {}
            if m.get("stop"):
                break
            if m.get("tag"):
                started = time.monotonic()
                metastore = (os.path.exists(dense)
                             or started - last_metastore >= BACKGROUND_S)
                if metastore:
                    last_metastore = started
                sample(spark, m, out, metastore)
                time.sleep(max(0.0, INTERVAL_S - (time.monotonic() - started)))
            else:
                time.sleep(0.2)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
