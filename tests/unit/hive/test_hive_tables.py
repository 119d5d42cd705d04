"""Table names, column types and locations that the exporter and compact both use."""

from __future__ import annotations

import pyarrow as pa
import pytest

from garmexport.settings.config import HiveConfig
from garmexport.wire.events import EXPORTED
from garmexport.hive.tables import (TableNaming, columns_of, dataset_schema, hive_type,
                                    new_columns, partition_location)


def test_tables_are_the_dataset_names_with_the_prefix_and_quarantine_has_its_own() -> None:
    naming = TableNaming.of(HiveConfig(database="db", table_prefix="g_",
                                       quarantine_table="bad_records"))
    assert naming.table("fs") == "g_fs"
    assert naming.table("_quarantine") == "g_bad_records"
    assert TableNaming().table("_quarantine") == "quarantine"


@pytest.mark.parametrize("arrow, hive", [
    (pa.string(), "string"), (pa.int32(), "int"), (pa.int64(), "bigint"),
    (pa.float64(), "double"), (pa.bool_(), "boolean"), (pa.binary(), "binary"),
    (pa.list_(pa.field("item", pa.string(), nullable=False)), "array<string>"),
    (pa.uint64(), "decimal(20,0)"), (pa.struct([("a", pa.int64()), ("b", pa.string())]),
                                     "struct<a:bigint,b:string>"),
])
def test_arrow_types_map_to_the_names_spark_gives_them(arrow: pa.DataType, hive: str) -> None:
    assert hive_type(arrow) == hive


def test_every_dataset_has_columns_and_no_day_column() -> None:
    for t in EXPORTED:
        cols = columns_of([dataset_schema(t.output)])  # type: ignore[arg-type]
        names = [n for n, _ in cols]
        assert "day" not in names and names[-3:] == ["timestamp", "kafka_partition", "kafka_offset"]
    q = dict(columns_of([dataset_schema("_quarantine")]))
    assert q["value"] == "binary" and q["kafka_offset"] == "bigint"


def test_union_keeps_first_types_and_adds_new_columns_at_the_end() -> None:
    old = pa.schema([("a", pa.int64()), ("day", pa.string())])
    new = pa.schema([("a", pa.int64()), ("b", pa.string())])
    assert columns_of([old, new]) == [("a", "bigint"), ("b", "string")]
    assert new_columns([("a", "bigint")], columns_of([new])) == ([("b", "string")], [])
    assert new_columns([("A", "BIGINT")], [("a", "int")]) == ([], ["a"])
    assert new_columns([("t", "array<string>")], [("t", "array< string>")]) == ([], [])


def test_partition_locations_sit_under_the_dataset_directory() -> None:
    assert partition_location("file:///out/", "gc", "2026-11-01") == "file:///out/gc/day=2026-11-01"
