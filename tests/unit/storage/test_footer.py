"""A file's footer facts: one reader for recovery and compaction, whatever the footer's size."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from garmexport.compaction.fs import LocalFs
from garmexport.compaction.scan import scan_day
from garmexport.storage.footer import FOOTER_TAIL_BYTES, FileFacts, read_facts, read_footer
from garmexport.protocol.naming import FileName, IntentName, chain_path, partition_dir
from garmexport.pipeline.parquet_io import to_parquet_bytes
from garmexport.pipeline.recovery import read_partition_state
from garmexport.protocol.resume import Chain
from garmexport.storage.local import LocalStorage

FACTS = FileFacts("local", "garmadon", 0, 100, 149, 50)
DAY = "2026-11-02"


def parquet_file(facts: FileFacts, footer_padding: int = 0) -> bytes:
    """A file of ``facts.rows`` rows; ``footer_padding`` bytes of extra schema metadata."""
    table = pa.table({"kafka_offset": pa.array(range(facts.first_offset,
                                                      facts.last_offset + 1), pa.int64())})
    if footer_padding:
        table = table.replace_schema_metadata({b"padding": b"x" * footer_padding})
    return to_parquet_bytes([table], facts, "zstd")


def footer_length(data: bytes) -> int:
    return int.from_bytes(data[-8:-4], "little")


def test_a_small_footer_is_read_from_one_tail(tmp_path) -> None:
    data = parquet_file(FACTS)
    (tmp_path / "f.parquet").write_bytes(data)
    assert read_facts(LocalFs(str(tmp_path)), "f.parquet") == FACTS


def test_a_footer_over_the_first_tail_read_is_read_whole(tmp_path) -> None:
    data = parquet_file(FACTS, footer_padding=3 * FOOTER_TAIL_BYTES)
    assert footer_length(data) > FOOTER_TAIL_BYTES
    (tmp_path / "f.parquet").write_bytes(data)
    fs = LocalFs(str(tmp_path))
    assert read_facts(fs, "f.parquet") == FACTS
    assert read_footer(fs, "f.parquet").num_rows == 50


@pytest.mark.parametrize("data", [b"", b"PAR1", b"not parquet at all, not at all",
                                  b"PAR1" + b"\0" * 20 + (10**6).to_bytes(4, "little") + b"PAR1"])
def test_what_is_not_a_parquet_footer_is_a_value_error(tmp_path, data: bytes) -> None:
    (tmp_path / "f").write_bytes(data)
    with pytest.raises(ValueError):
        read_footer(LocalFs(str(tmp_path)), "f")


def test_a_footer_without_our_facts_is_a_value_error(tmp_path) -> None:
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": [1, 2]}), sink)
    (tmp_path / "f").write_bytes(sink.getvalue())
    with pytest.raises(ValueError, match="no garmexport metadata"):
        read_facts(LocalFs(str(tmp_path)), "f")


def test_recovery_reads_the_last_offset_of_a_file_with_a_large_footer(tmp_path) -> None:
    storage = LocalStorage(str(tmp_path), "e1")
    name = FileName(FACTS.source, FACTS.topic, FACTS.partition, FACTS.first_offset)
    intent = IntentName("fs", "d", DAY, FACTS.first_offset)
    storage.put_exclusive(f"{partition_dir('local', 'garmadon', 0)}/{intent.format()}", b"")
    storage.put_exclusive(chain_path("fs", "d", DAY, name),
                          parquet_file(FACTS, footer_padding=2 * FOOTER_TAIL_BYTES))
    state = read_partition_state(storage, "local", "garmadon", 0)
    assert state.files_checked == 1
    assert state.state.last == {Chain("fs", "d", DAY): FACTS.last_offset}


def test_compaction_and_recovery_read_the_same_facts(tmp_path) -> None:
    name = FileName(FACTS.source, FACTS.topic, FACTS.partition, FACTS.first_offset)
    path = tmp_path / "fs" / f"day={DAY}" / name.format()
    path.parent.mkdir(parents=True)
    path.write_bytes(parquet_file(FACTS, footer_padding=2 * FOOTER_TAIL_BYTES))
    inputs, _, problems = scan_day(LocalFs(str(tmp_path)), "fs", DAY)
    assert problems == []
    (r,) = inputs[0].ranges
    assert (r.partition, r.first_offset, r.last_offset, r.rows) == (0, 100, 149, 50)
