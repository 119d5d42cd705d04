"""The PySpark part of compaction: build the session, and write the outputs of one plan.

Execution of a :class:`DayPlan` (step 1 of :mod:`.swap`): the union schema of the inputs is
inferred from one file per distinct footer schema (``mergeSchema``: a type whose .proto
gained a field has old files without the column; they read as NULL), then every planned
output is its own Spark write, ``read(inputs of k).coalesce(1).sortWithinPartitions(sort
columns)``: exactly one file per output, no shuffle. (One union of all outputs was tried
first: Spark 4 merged its partitions into one file.) The part file of output k is moved to
``<staging>/part-<k>.parquet``; then each staged footer's row count must equal the planned
rows, or the job raises ProtocolViolation before any journal exists (nothing visible has
changed; the staging dir is removed).

Timestamps are int64 epoch ms, so the files read back in pyarrow and Hive unchanged; Spark
writes standard (non-legacy) Parquet lists.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Mapping, Sequence
from typing import Any

from garmexport.protocol.naming import day_dir
from garmexport.compaction import spark_logs
from garmexport.compaction.fs import FileOps
from garmexport.compaction.plan import DayPlan
from garmexport.errors import ProtocolViolation
from garmexport.storage.footer import read_footer

_PART_RE = re.compile(r"^part-(\d{5})-.*\.parquet$")


def build_session(master: str, metastore_uri: str = "",
                  conf: Mapping[str, str] | None = None, app_name: str = "garmexport-compact",
                  log_level: str = "ERROR") -> Any:
    """A SparkSession with Hive support; a remote metastore when ``metastore_uri`` is set,
    else the embedded Derby one (configured through ``conf``). The driver JVM's output
    becomes garmexport log lines at ``log_level`` and above (:mod:`.spark_logs`)."""
    from pyspark.sql import SparkSession

    settings = {
        "spark.master": master, "spark.app.name": app_name,
        "spark.sql.catalogImplementation": "hive",
        # day=2026-11-01 must stay a string, as the Hive tables declare it
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        # inputs are explicit file paths: a listing job per output costs more than a few
        # thousand getFileStatus calls from the driver
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    }
    if metastore_uri:
        settings["spark.hadoop.hive.metastore.uris"] = metastore_uri
    settings = spark_logs.session_conf({**settings, **(conf or {})}, log_level)
    spark_logs.set_python_levels(log_level)
    spark_logs.launch_jvm(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.enableHiveSupport().getOrCreate()


def input_uris(fs: FileOps, plan: DayPlan) -> list[list[str]]:
    base = f"{fs.uri}/{day_dir(plan.output, plan.day)}"
    return [[f"{base}/{f.name}" for f in o.inputs] for o in plan.outputs]


def union_schema(spark: Any, uris: Sequence[str]) -> Any:
    """The merged Spark schema of ``uris`` (one file per distinct schema is enough)."""
    return spark.read.option("mergeSchema", "true").parquet(*uris).schema


def _write_one(spark: Any, fs: FileOps, uris: list[str], schema: Any, sort: list[str],
               codec: str, staging: str, k: int) -> tuple[str, int]:
    """Write one output with one task; move its single part file to staging/part-k."""
    out_dir = f"{staging}/{k:05d}"
    (spark.read.schema(schema).parquet(*uris).coalesce(1).sortWithinPartitions(*sort)
     .write.option("compression", codec).parquet(f"{fs.uri}/{out_dir}"))
    parts = [e for e in fs.list(out_dir) if _PART_RE.match(e.name)]
    if len(parts) != 1:
        raise ProtocolViolation(f"Spark wrote {len(parts)} part files in {out_dir}, not 1")
    staged = f"{staging}/part-{k:05d}.parquet"
    fs.rename(f"{out_dir}/{parts[0].name}", staged)
    fs.delete_tree(out_dir)
    return staged, parts[0].size


def write_outputs(spark: Any, fs: FileOps, plan: DayPlan, staging: str, codec: str,
                  sort_columns: Sequence[str]) -> tuple[list[str], Any, int]:
    """Write the plan's outputs into ``staging`` (relative dir, must not exist).

    Returns (staged relative path of output k for every k, the union schema, bytes written).
    Raises ProtocolViolation (after removing the staging dir) when the staged files do
    not match the plan.
    """
    base = f"{fs.uri}/{day_dir(plan.output, plan.day)}"
    schema = union_schema(spark, [f"{base}/{f.name}" for f in plan.schema_samples()])
    sort = [c for c in sort_columns if c in schema.fieldNames()]
    groups = input_uris(fs, plan)
    # One Spark job per output, a few at a time: each is a single task (one output file),
    # so running them side by side keeps the executor cores busy.
    workers = max(1, min(len(groups), int(spark.sparkContext.defaultParallelism)))
    try:
        with ThreadPoolExecutor(workers) as pool:
            staged = list(pool.map(lambda kg: _write_one(spark, fs, kg[1], schema, sort, codec,
                                                         staging, kg[0]), enumerate(groups)))
        for (path, _), out in zip(staged, plan.outputs):
            rows = read_footer(fs, path).num_rows
            if rows != out.rows:
                raise ProtocolViolation(f"{path} holds {rows} rows, {out.name.format()} "
                                        f"should hold {out.rows}")
    except BaseException:
        fs.delete_tree(staging)
        raise
    return [p for p, _ in staged], schema, sum(n for _, n in staged)
