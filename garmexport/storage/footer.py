"""A Parquet file's footer and the Kafka facts it records, read from any store by tail reads.

Every data and quarantine file carries key-value metadata naming its Kafka origin
(``garmexport.source``, ``.topic``, ``.partition``, ``.first_offset``, ``.last_offset``,
``.rows``), so a file can be traced back to Kafka, recovery learns a file's last offset from
its footer alone, and compaction learns a raw file's range the same way. This module is the
one home of those keys and of reading a footer: a first tail read of ``FOOTER_TAIL_BYTES``
holds almost every footer; a larger footer (very wide schemas, many row groups) is read
again with the length the file's last 8 bytes state, never by reading the data.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

FOOTER_TAIL_BYTES = 64 * 1024
KEY_PREFIX = "garmexport."
_MAGIC = b"PAR1"


class TailReader(Protocol):
    """What reading a footer needs of a store (``Storage`` and compaction's ``FileOps``)."""

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]: ...


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
        values = meta or {}

        def get(key: str) -> str:
            return values[(KEY_PREFIX + key).encode()].decode()

        try:
            return FileFacts(get("source"), get("topic"), int(get("partition")),
                             int(get("first_offset")), int(get("last_offset")), int(get("rows")))
        except KeyError as exc:
            raise ValueError(f"no garmexport metadata {exc}") from None


def read_footer(store: TailReader, path: str, size: int | None = None) -> pq.FileMetaData:
    """The Parquet footer of ``path``, from one tail read (two if the footer is larger).

    ``size``: the file's size from a listing, which spares a store like WebHDFS a request
    per footer (``Storage.read_tail``); a file that changed size since then fails the
    checks below. Raises ValueError if the file is not Parquet or its footer does not
    parse, and whatever ``read_tail`` raises (FileNotFoundError for a missing file).
    """
    tail, size = store.read_tail(path, FOOTER_TAIL_BYTES, size)
    if len(tail) < 12 or tail[-4:] != _MAGIC:
        raise ValueError(f"{path} is not a Parquet file")
    (length,) = struct.unpack("<i", tail[-8:-4])
    if length < 0:
        raise ValueError(f"{path}: footer length {length}")
    if length + 8 > len(tail):
        tail, _ = store.read_tail(path, length + 8, size)
        if len(tail) < length + 8:
            raise ValueError(f"{path}: footer length {length} exceeds the file")
    # read_metadata needs a whole "file": magic + footer + length + magic is enough.
    try:
        return pq.read_metadata(pa.BufferReader(_MAGIC + tail[-(length + 8):]))
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path}: unreadable Parquet footer: {exc}") from None


def read_facts(store: TailReader, path: str) -> FileFacts:
    """The FileFacts in the footer of ``path`` (ValueError if unreadable or not ours)."""
    return FileFacts.from_metadata(read_footer(store, path).metadata)


def column_max(meta: pq.FileMetaData, column: str) -> int | None:
    """The highest value of integer ``column`` over every row group, from the footer's
    column statistics (None for a file without rows or whose column is all NULL).

    This is how the Garmadon JVM exporter's files are read (their footers hold no
    garmexport keys); raises ValueError when the column is missing or a row group with
    values has no min/max statistics, since guessing would move a resume position.
    """
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    if column not in names:
        raise ValueError(f"no column {column!r} (columns: {', '.join(names[:8])}...)")
    index = names.index(column)
    best: int | None = None
    for g in range(meta.num_row_groups):
        chunk = meta.row_group(g).column(index)
        if meta.row_group(g).num_rows == 0:
            continue
        stats = chunk.statistics
        if stats is not None and stats.has_null_count and stats.null_count == chunk.num_values:
            continue  # only NULLs in this row group
        if stats is None or not stats.has_min_max:
            raise ValueError(f"row group {g} has no min/max statistics for {column!r}")
        best = int(stats.max) if best is None else max(best, int(stats.max))
    return best
