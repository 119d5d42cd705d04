"""Hive tables: one EXTERNAL table per event type, partitioned by ``day STRING``.

``<database>.<output>`` has LOCATION ``<root>/<output>`` and one partition per day
directory, LOCATION ``<root>/<output>/day=D`` (raw and compacted files share it, see
:mod:`.swap`). The statements are built by pure functions; :func:`sync_table` runs them:

- creates the database and the table if missing, with the columns of the data;
- adds the columns the data gained (``ALTER TABLE .. ADD COLUMNS``: days written before
  read NULL); a column whose type changed is reported, never altered (Hive cannot read
  old files as the new type);
- adds a partition for every day directory the metastore does not know
  (``ADD IF NOT EXISTS``, so a repeated or concurrent run is harmless).

The metastore is Spark's: embedded Derby by default, a remote one through
``spark.hadoop.hive.metastore.uris`` (see :func:`.spark_job.build_session`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from garmexport.logs import log_event

log = logging.getLogger(__name__)
PARTITION_COLUMN = "day"


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _lit(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_table_sql(database: str, table: str, columns: Sequence[tuple[str, str]],
                     location: str) -> str:
    cols = ", ".join(f"{quote(n)} {t}" for n, t in columns if n.lower() != PARTITION_COLUMN)
    return (f"CREATE EXTERNAL TABLE IF NOT EXISTS {quote(database)}.{quote(table)} ({cols}) "
            f"PARTITIONED BY ({PARTITION_COLUMN} STRING) STORED AS PARQUET "
            f"LOCATION {_lit(location)}")


def new_columns(table: Sequence[tuple[str, str]], data: Sequence[tuple[str, str]]
                ) -> tuple[list[tuple[str, str]], list[str]]:
    """(columns of ``data`` the table lacks, in data order; names whose type differs).

    Names compare case-insensitively, as Hive does; the partition column is ignored.
    """
    known = {n.lower(): t for n, t in table}
    added = [(n, t) for n, t in data
             if n.lower() not in known and n.lower() != PARTITION_COLUMN]
    changed = [n for n, t in data if n.lower() in known and n.lower() != PARTITION_COLUMN
               and known[n.lower()].lower() != t.lower()]
    return added, changed


def add_columns_sql(database: str, table: str, columns: Sequence[tuple[str, str]]) -> str:
    cols = ", ".join(f"{quote(n)} {t}" for n, t in columns)
    return f"ALTER TABLE {quote(database)}.{quote(table)} ADD COLUMNS ({cols})"


def add_partitions_sql(database: str, table: str, days: Iterable[str], table_location: str
                       ) -> str | None:
    specs = [f"PARTITION ({PARTITION_COLUMN}={_lit(d)}) "
             f"LOCATION {_lit(f'{table_location}/{PARTITION_COLUMN}={d}')}" for d in days]
    if not specs:
        return None
    return f"ALTER TABLE {quote(database)}.{quote(table)} ADD IF NOT EXISTS " + " ".join(specs)


def schema_columns(schema: Any) -> list[tuple[str, str]]:
    """(name, Hive type) of a Spark StructType."""
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def sync_table(spark: Any, database: str, output: str, root_uri: str, schema: Any,
               days: Sequence[str]) -> dict[str, int]:
    """Create/extend table ``database.output`` for ``schema`` and register ``days``."""
    fq = f"{quote(database)}.{quote(output)}"
    location = f"{root_uri}/{output}"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
    data = schema_columns(schema)
    added: list[tuple[str, str]] = []
    if not spark.catalog.tableExists(f"{database}.{output}"):
        spark.sql(create_table_sql(database, output, data, location))
    else:
        table = schema_columns(spark.table(fq).schema)
        added, changed = new_columns(table, data)
        if added:
            spark.sql(add_columns_sql(database, output, added))
        if changed:
            log_event(log, "hive_column_type_changed", level=logging.WARNING,
                      table=f"{database}.{output}", columns=changed)
    known = {r[0].partition("=")[2] for r in spark.sql(f"SHOW PARTITIONS {fq}").collect()}
    new_days = [d for d in days if d not in known]
    sql = add_partitions_sql(database, output, new_days, location)
    if sql is not None:
        spark.sql(sql)
    # This session may have cached the file listing of days this run rewrote.
    spark.catalog.refreshTable(f"{database}.{output}")
    return {"columns_added": len(added), "partitions_added": len(new_days)}
