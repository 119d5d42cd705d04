"""How an open file holds its rows in memory until it is published, and what that costs.

A piece is the rows one batch added to one open file. As an Arrow table, a piece costs
native memory for every column (and list child) that neither the Arrow pool nor
``Table.nbytes`` shows: measured here, a 3-row slice of a 27-column table holds about 12
KiB that way, and a copied one about 27 KiB, for 1.2 KiB of values. A chain of late events
is many such pieces, so thousands of open files held several times the memory budget that
counted only values. A small piece is therefore kept packed: its rows as one Arrow IPC
record-batch message in a Python ``bytes`` (3.8 KiB for the same 3 rows), whose length is
what it costs. A large piece stays a zero-copy slice of its decoded batch, where the
per-column cost is small next to the values, and is counted as its values plus
:data:`NODE_OVERHEAD_BYTES` per array node; unless it would pin a batch much larger than
itself, which is packed too (a copy of its own rows only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

#: pieces with fewer bytes of values than this are packed
PACK_BELOW_BYTES = 256 * 1024
#: native memory per array node of a table slice: 12.4 KiB for 27 nodes (FS_EVENT), 26 KiB
#: for 55 (SPARK_TASK_EVENT), rounded up
NODE_OVERHEAD_BYTES = 512


@dataclass(frozen=True)
class Packed:
    """Rows as Arrow IPC record-batch messages (no schema: it is kept beside them)."""

    schema: pa.Schema
    messages: tuple[bytes, ...]

    def table(self) -> pa.Table:
        return pa.Table.from_batches(
            [pa.ipc.read_record_batch(pa.py_buffer(m), self.schema) for m in self.messages],
            self.schema)


Piece = pa.Table | Packed


def keep(table: pa.Table, nbytes: int) -> Piece:
    """What an open file should hold for ``table``: the table itself or its packed rows.

    ``nbytes`` is ``table.nbytes``, which the caller has: on a slice it costs about 50 us
    (it measures every column's referenced range), so it is computed once per piece."""
    if nbytes < PACK_BELOW_BYTES or table.get_total_buffer_size() > 2 * nbytes:
        return Packed(table.schema,
                      tuple(b.serialize().to_pybytes() for b in table.to_batches() if b.num_rows))
    return table


def held_bytes(piece: Piece, nbytes: int) -> int:
    """Memory ``piece`` keeps alive, as the memory budget counts it; ``nbytes`` is the
    ``Table.nbytes`` of the rows it was made of."""
    if isinstance(piece, Packed):
        return sum(len(m) for m in piece.messages)
    return nbytes + NODE_OVERHEAD_BYTES * _nodes(piece.schema)


def tables(pieces: Sequence[Piece]) -> list[pa.Table]:
    return [p.table() if isinstance(p, Packed) else p for p in pieces]


#: (schema, its node count) of the schemas seen: one per event type, and the quarantine's
_KNOWN_NODES: list[tuple[pa.Schema, int]] = []
_MAX_KNOWN = 64


def _nodes(schema: pa.Schema) -> int:
    # Found by Schema.equals (a fraction of a microsecond), not by hashing: a schema's hash
    # is computed anew on every call, 30 us for a table of 22 columns, once per piece kept.
    for known, count in _KNOWN_NODES:
        if known.equals(schema):
            return count
    count = sum(_type_nodes(f.type) for f in schema)
    if len(_KNOWN_NODES) < _MAX_KNOWN:
        _KNOWN_NODES.append((schema, count))
    return count


def _type_nodes(t: pa.DataType) -> int:
    return 1 + sum(_type_nodes(t.field(i).type) for i in range(t.num_fields))
