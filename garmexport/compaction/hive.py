"""Hive tables through Spark SQL: the tables of :mod:`garmexport.hive.tables`.

One EXTERNAL table per dataset (names, columns and locations from
:mod:`garmexport.hive.tables`, the rules the exporter's registration uses too), one
partition per day directory (raw and compacted files share it, see :mod:`.swap`). The
statements are built by pure functions; :func:`sync_table` runs them:

- creates the database and the table if missing, with the columns of the data;
- adds the columns the data gained (``ALTER TABLE .. ADD COLUMNS``: days written before
  read NULL); a column whose type changed is reported, never altered (Hive cannot read
  old files as the new type);
- adds a partition for every day directory the metastore does not know
  (``ADD IF NOT EXISTS``, so a repeated or concurrent run is harmless);
- :func:`locate` points one day's partition at a directory: the flips of a swap
  (:mod:`.swap`), one ``ALTER TABLE .. PARTITION .. SET LOCATION`` (one metastore
  ``alter_partition`` call) each.

The metastore is Spark's: embedded Derby by default, a remote one through
``spark.hadoop.hive.metastore.uris`` (see :func:`.spark_job.build_session`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from garmexport.hive.tables import PARTITION_COLUMN, new_columns
from garmexport.observe.logs import log_event

log = logging.getLogger(__name__)


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


def sync_table(spark: Any, database: str, table: str, location: str,
               data: Sequence[tuple[str, str]], days: Sequence[str]) -> dict[str, int]:
    """Create/extend ``database.table`` (LOCATION ``location``) for columns ``data`` (name,
    Hive type) and register ``days``."""
    fq = f"{quote(database)}.{quote(table)}"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
    added: list[tuple[str, str]] = []
    if not spark.catalog.tableExists(f"{database}.{table}"):
        spark.sql(create_table_sql(database, table, data, location))
    else:
        known = [(r.col_name, r.data_type) for r in spark.sql(f"DESCRIBE {fq}").collect()
                 if r.col_name and not r.col_name.startswith("#")]
        added, changed = new_columns(known, data)
        if added:
            spark.sql(add_columns_sql(database, table, added))
        if changed:
            log_event(log, "hive_column_type_changed", level=logging.WARNING,
                      table=f"{database}.{table}", columns=changed)
    known_days = {r[0].partition("=")[2] for r in spark.sql(f"SHOW PARTITIONS {fq}").collect()}
    new_days = [d for d in days if d not in known_days]
    sql = add_partitions_sql(database, table, new_days, location)
    if sql is not None:
        spark.sql(sql)
    # This session may have cached the file listing of days this run rewrote.
    spark.catalog.refreshTable(f"{database}.{table}")
    return {"columns_added": len(added), "partitions_added": len(new_days)}


def locate_sql(database: str, table: str, day: str, location: str) -> list[str]:
    """Create the day's partition at ``location`` if missing, then set its location."""
    fq = f"{quote(database)}.{quote(table)}"
    spec = f"PARTITION ({PARTITION_COLUMN}={_lit(day)})"
    return [f"ALTER TABLE {fq} ADD IF NOT EXISTS {spec} LOCATION {_lit(location)}",
            f"ALTER TABLE {fq} {spec} SET LOCATION {_lit(location)}"]


def locate(spark: Any, database: str, table: str, day: str, location: str) -> bool:
    """Point the day's partition of ``database.table`` at ``location``; False (and nothing
    done) when the table does not exist: no metastore reader can see the day then, and
    :func:`sync_table` registers it at the day directory once the swap is over."""
    if not spark.catalog.tableExists(f"{database}.{table}"):
        return False
    add, move = locate_sql(database, table, day, location)
    spark.sql(add)
    started = time.monotonic()
    spark.sql(move)
    log_event(log, "hive_partition_located", table=f"{database}.{table}", day=day,
              location=location, seconds=round(time.monotonic() - started, 3))
    return True
