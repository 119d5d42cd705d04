"""The PySpark part of compaction: build the session, and write the outputs of one plan.

Execution of a :class:`DayPlan` (step 1 of :mod:`.swap`): the union schema of all inputs is
read once (``mergeSchema``: a type whose .proto gained a field has old files without the
column; they read as NULL), then every planned output becomes one Spark partition --
``read(inputs of output k).coalesce(1).sortWithinPartitions(sort columns)``, all unioned
in plan order -- so the write produces exactly one file per planned output with no shuffle,
``part-<k>-...`` for output k. After the write, each staged file's footer row count must
equal its planned row count, or the job raises ProtocolViolation before any journal exists
(nothing visible has changed; the staging dir is removed).

Timestamps are int64 epoch ms, so the files read back in pyarrow and Hive unchanged; Spark
writes standard (non-legacy) Parquet lists.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from garmexport.compaction.fs import FileOps
from garmexport.compaction.names import day_dir
from garmexport.compaction.plan import DayPlan
from garmexport.compaction.scan import footer
from garmexport.errors import ProtocolViolation

_PART_RE = re.compile(r"^part-(\d{5})-.*\.parquet$")


def build_session(master: str, metastore_uri: str = "",
                  conf: Mapping[str, str] | None = None, app_name: str = "garmexport-compact"
                  ) -> Any:
    """A SparkSession with Hive support; a remote metastore when ``metastore_uri`` is set,
    else the embedded Derby one (configured through ``conf``)."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               # day=2026-11-01 must stay a string, as the Hive tables declare it
               .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false"))
    if metastore_uri:
        builder = builder.config("spark.hadoop.hive.metastore.uris", metastore_uri)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.enableHiveSupport().getOrCreate()


def input_uris(fs: FileOps, plan: DayPlan) -> list[list[str]]:
    base = f"{fs.uri}/{day_dir(plan.output, plan.day)}"
    return [[f"{base}/{f.name}" for f in o.inputs] for o in plan.outputs]


def write_outputs(spark: Any, fs: FileOps, plan: DayPlan, staging: str, codec: str,
                  sort_columns: Sequence[str]) -> tuple[list[str], Any, int]:
    """Write the plan's outputs into ``staging`` (relative dir, must not exist).

    Returns (staged relative path of output k for every k, the union schema, bytes written).
    Raises ProtocolViolation when the staged files do not match the plan.
    """
    groups = input_uris(fs, plan)
    schema = (spark.read.option("mergeSchema", "true")
              .parquet(*[u for g in groups for u in g]).schema)
    sort = [c for c in sort_columns if c in schema.fieldNames()]
    frames = [spark.read.schema(schema).parquet(*g).coalesce(1).sortWithinPartitions(*sort)
              for g in groups]
    union = functools.reduce(lambda a, b: a.union(b), frames)
    (union.write.option("compression", codec)
     .parquet(f"{fs.uri}/{staging}"))
    staged: dict[int, tuple[str, int]] = {}
    for e in fs.list(staging):
        m = _PART_RE.match(e.name)
        if m:
            staged[int(m[1])] = (f"{staging}/{e.name}", e.size)
    if sorted(staged) != list(range(len(plan.outputs))):
        fs.delete_tree(staging)
        raise ProtocolViolation(f"Spark wrote parts {sorted(staged)} for "
                                f"{len(plan.outputs)} planned outputs in {staging}")
    for k, out in enumerate(plan.outputs):
        rows = footer(fs, staged[k][0]).num_rows
        if rows != out.rows:
            fs.delete_tree(staging)
            raise ProtocolViolation(f"{staged[k][0]} holds {rows} rows, {out.name.format()} "
                                    f"should hold {out.rows}")
    return [staged[k][0] for k in range(len(plan.outputs))], schema, sum(
        s for _, s in staged.values())
