"""What the Hive tables are: names, columns, locations. Pure; shared by the exporter and compact.

One EXTERNAL Parquet table per dataset (event type, and ``_quarantine``), partitioned by
``day STRING`` (``2026-11-01``: a string everywhere, data and quarantine alike; Spark's
partition type inference is switched off so that it agrees). The table of dataset ``out``
is ``<database>.<prefix><out>``; ``_quarantine``'s is ``<database>.<prefix><quarantine>``.
Table LOCATION is ``<root>/<out>``, partition LOCATION ``<root>/<out>/day=D``.

Columns come from Arrow schemas through :func:`hive_type`, the one mapping both writers of
table definitions use: the exporter from the schema it writes (:func:`dataset_schema`),
``compact`` from the footers of the files it reads. Spark reads these types back unchanged
(``int``, ``bigint``, ``array<string>``...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from garmexport.settings.config import HiveConfig
from garmexport.protocol.naming import QUARANTINE_DIR

PARTITION_COLUMN = "day"

_SIMPLE = {
    pa.string(): "string", pa.large_string(): "string", pa.binary(): "binary",
    pa.large_binary(): "binary", pa.bool_(): "boolean", pa.int8(): "tinyint",
    pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint", pa.uint8(): "smallint",
    pa.uint16(): "int", pa.uint32(): "bigint", pa.uint64(): "decimal(20,0)",
    pa.float32(): "float", pa.float64(): "double", pa.date32(): "date",
}


@dataclass(frozen=True)
class TableNaming:
    """How datasets map to tables (``[hive]`` database, table_prefix, quarantine_table)."""

    database: str = "garmadon"
    prefix: str = ""
    quarantine: str = "quarantine"

    def table(self, output: str) -> str:
        """Table name of dataset ``output`` (lower case, as the metastore keeps it)."""
        name = self.quarantine if output == QUARANTINE_DIR else output
        return (self.prefix + name).lower()

    @classmethod
    def of(cls, hive: HiveConfig) -> TableNaming:
        return cls(hive.database, hive.table_prefix, hive.quarantine_table)


def hive_type(t: pa.DataType) -> str:
    """The Hive column type of an Arrow type; TypeError for a type Hive has no name for."""
    if t in _SIMPLE:
        return _SIMPLE[t]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{hive_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{hive_type(f.type)}" for f in t) + ">"
    if pa.types.is_map(t):
        return f"map<{hive_type(t.key_type)},{hive_type(t.item_type)}>"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp"
    raise TypeError(f"no Hive type for Arrow type {t}")


def columns_of(schemas: Sequence[pa.Schema]) -> list[tuple[str, str]]:
    """(name, Hive type) of the union of ``schemas``, first appearance first; a name seen
    again keeps its first type (the table's). The partition column is never a column."""
    seen: dict[str, tuple[str, str]] = {}
    for schema in schemas:
        for f in schema:
            if f.name.lower() != PARTITION_COLUMN and f.name.lower() not in seen:
                seen[f.name.lower()] = (f.name, hive_type(f.type))
    return list(seen.values())


def dataset_schema(output: str) -> pa.Schema:
    """The Arrow schema this exporter writes for dataset ``output``."""
    if output == QUARANTINE_DIR:
        from garmexport.wire.quarantine import SCHEMA

        return SCHEMA
    from garmexport.wire.schema import schema_for
    from garmexport.wire.events import by_output

    return schema_for(by_output(output))


def table_location(root_uri: str, output: str) -> str:
    return f"{root_uri.rstrip('/')}/{output}"


def partition_location(root_uri: str, output: str, day: str) -> str:
    return f"{table_location(root_uri, output)}/{PARTITION_COLUMN}={day}"


def new_columns(table: Sequence[tuple[str, str]], data: Sequence[tuple[str, str]]
                ) -> tuple[list[tuple[str, str]], list[str]]:
    """(columns of ``data`` the table lacks, in data order; names whose type differs).

    Names compare case-insensitively, as Hive does; the partition column is ignored.
    """
    known = {n.lower(): t for n, t in table}
    added = [(n, t) for n, t in data
             if n.lower() not in known and n.lower() != PARTITION_COLUMN]
    changed = [n for n, t in data if n.lower() in known and n.lower() != PARTITION_COLUMN
               and known[n.lower()].replace(" ", "").lower() != t.replace(" ", "").lower()]
    return added, changed
