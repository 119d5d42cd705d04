"""Parquet bytes of an open file: same rows back, facts in the footer, chosen encodings."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

from garmexport.wire.columns import decode_batch
from garmexport.wire.schema import schema_for
from garmexport.wire.events import EXPORTED
from garmexport.testbed.generator import Spec, generate
from garmexport.pipeline.parquet_io import UNIQUE_COLUMNS, FileFacts, to_parquet_bytes

FACTS = FileFacts("local", "garmadon", 3, 100, 4099, 4000)


def generated_table(event_type, n: int = 4000):  # noqa: ANN001, ANN201
    spec = Spec(now_ms=1_795_300_000_000, partitions=1, days=1, late_share=0.0,
                mix={event_type.name: 1.0})
    values = [r.value for r in generate(spec, n)]
    table, failures = decode_batch(event_type, values, 3, list(range(100, 100 + n)))
    assert not failures
    return table


@pytest.mark.parametrize("event_type", EXPORTED[:3], ids=lambda t: t.output)
def test_pieces_come_back_as_one_file_with_its_facts(event_type):
    table = generated_table(event_type)
    pieces = [table.slice(0, 1000), table.slice(1000, 2500), table.slice(3500)]
    data = to_parquet_bytes(pieces, FACTS, "zstd")
    back = pq.read_table(io.BytesIO(data))
    assert back.equals(table)
    assert FileFacts.from_metadata(pq.read_metadata(io.BytesIO(data)).metadata) == FACTS


def test_unique_columns_are_plain_and_the_others_dictionary_encoded():
    event_type = EXPORTED[0]
    data = to_parquet_bytes([generated_table(event_type)], FACTS, "zstd")
    group = pq.read_metadata(io.BytesIO(data)).row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    for name in UNIQUE_COLUMNS:
        assert not chunks[name].has_dictionary_page, name
    assert chunks["kafka_partition"].has_dictionary_page
    strings = [f.name for f in schema_for(event_type) if str(f.type) == "string"]
    assert strings and all(chunks[name].has_dictionary_page for name in strings)


def test_the_unique_columns_are_named_as_in_every_schema():
    for event_type in EXPORTED:
        assert UNIQUE_COLUMNS <= set(schema_for(event_type).names), event_type.name
