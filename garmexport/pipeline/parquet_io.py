"""Parquet bytes in memory, with the offsets a published file's footer records.

Every data and quarantine file carries key-value metadata naming its Kafka origin
(:class:`garmexport.storage.footer.FileFacts`), so a file can be traced back to Kafka and recovery
can learn a file's last offset from its footer alone (:func:`garmexport.storage.footer.read_facts`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from garmexport.storage.footer import FileFacts

__all__ = ["UNIQUE_COLUMNS", "FileFacts", "to_parquet_bytes"]

#: Columns whose values are (nearly) all distinct within a file: Kafka offsets rise by one
#: per row and event times rarely repeat, so a dictionary as large as the column costs
#: hashing every value and bytes in every file. They are written plain (and compressed).
UNIQUE_COLUMNS = frozenset({"kafka_offset", "timestamp"})


def to_parquet_bytes(tables: Sequence[pa.Table], facts: FileFacts, compression: str) -> bytes:
    """One Parquet file holding ``tables`` (same schema) in order, with ``facts`` attached."""
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **facts.metadata()})
    sink = pa.BufferOutputStream()
    dictionary = [name for name in table.schema.names if name not in UNIQUE_COLUMNS]
    pq.write_table(table, sink, compression=compression, row_group_size=256 * 1024,
                   use_dictionary=dictionary)
    return sink.getvalue().to_pybytes()

