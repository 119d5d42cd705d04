"""Parquet bytes in memory, and the offsets a published file's footer records.

Every data and quarantine file carries key-value metadata naming its Kafka origin, so a
file can be traced back to Kafka and recovery can learn a file's last offset from its
footer alone (the last 64 KiB of the file, never its data).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

FOOTER_TAIL_BYTES = 64 * 1024
KEY_PREFIX = "garmexport."


@dataclass(frozen=True)
class FileFacts:
    """What a published file says of itself in its footer."""

    source: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    rows: int

    def metadata(self) -> dict[bytes, bytes]:
        return {
            (KEY_PREFIX + k).encode(): str(v).encode()
            for k, v in (
                ("source", self.source), ("topic", self.topic), ("partition", self.partition),
                ("first_offset", self.first_offset), ("last_offset", self.last_offset),
                ("rows", self.rows),
            )
        }

    @staticmethod
    def from_metadata(meta: Mapping[bytes, bytes] | None) -> FileFacts:
        """Raises ValueError when the metadata is not ours."""
        meta = meta or {}
        try:
            get = lambda k: meta[(KEY_PREFIX + k).encode()].decode()  # noqa: E731
            return FileFacts(get("source"), get("topic"), int(get("partition")),
                             int(get("first_offset")), int(get("last_offset")), int(get("rows")))
        except KeyError as exc:
            raise ValueError(f"no garmexport metadata {exc}") from None


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


def facts_from_tail(tail: bytes) -> FileFacts:
    """The FileFacts in the footer of a Parquet file whose last bytes are ``tail``.

    Raises ValueError if the tail does not hold a whole footer or the metadata is not ours.
    """
    try:
        meta = pq.read_metadata(pa.BufferReader(tail))
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"unreadable Parquet footer: {exc}") from None
    return FileFacts.from_metadata(meta.metadata)
