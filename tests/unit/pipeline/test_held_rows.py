"""How open files hold their rows: packed pieces come back equal, and cost what they count."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.pipeline import held_rows
from garmexport.pipeline.held_rows import NODE_OVERHEAD_BYTES, PACK_BELOW_BYTES, Packed, held_bytes, keep, tables
from garmexport.wire.quarantine import quarantine_table
from tests.hypothesis_profiles import examples

SCHEMA = pa.schema([
    ("s", pa.string()), ("tags", pa.list_(pa.field("item", pa.string(), nullable=False))),
    ("n", pa.int64()), ("f", pa.float32()), ("b", pa.bool_()), ("kafka_offset", pa.int64()),
])

_row = st.fixed_dictionaries({
    "s": st.none() | st.text(max_size=12),
    "tags": st.none() | st.lists(st.text(max_size=5), max_size=3),
    "n": st.none() | st.integers(-2**63, 2**63 - 1),
    "f": st.none() | st.floats(width=32, allow_nan=False),
    "b": st.none() | st.booleans(),
})


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{**r, "kafka_offset": i} for i, r in enumerate(rows)], SCHEMA)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_row, min_size=1, max_size=40), st.data())
def test_a_kept_slice_comes_back_equal(rows, data):
    table = _table(rows)
    start = data.draw(st.integers(0, len(rows) - 1))
    length = data.draw(st.integers(1, len(rows) - start))
    part = table.slice(start, length)
    [back] = tables([keep(part, part.nbytes)])
    assert back.schema == SCHEMA
    assert back.to_pylist() == part.to_pylist()


def test_a_small_piece_is_packed_and_costs_exactly_its_messages():
    part = _table([{"s": f"x{i}", "tags": ["a"], "n": i, "f": 1.0, "b": True} for i in range(100)]).slice(10, 3)
    piece = keep(part, part.nbytes)
    assert isinstance(piece, Packed)
    assert held_bytes(piece, part.nbytes) == sum(len(m) for m in piece.messages)
    assert held_bytes(piece, part.nbytes) < 4096  # no copy of the whole batch went into it


def _big(rows: int) -> pa.Table:
    return _table([{"s": "v" * 40, "tags": ["t1", "t2"], "n": i, "f": 0.5, "b": False}
                   for i in range(rows)])


def test_a_large_slice_stays_zero_copy_and_counts_its_columns():
    table = _big(20_000)
    part = table.slice(1_000, 15_000)  # most of its batch: pins little beyond itself
    assert part.nbytes >= PACK_BELOW_BYTES
    piece = keep(part, part.nbytes)
    assert piece is part
    held = held_bytes(piece, part.nbytes)
    assert held == part.nbytes + NODE_OVERHEAD_BYTES * 7  # 6 columns + list child


def test_a_large_slice_that_would_pin_its_batch_is_packed():
    table = _big(60_000)
    part = table.slice(0, 12_000)  # a fifth of its batch
    assert part.nbytes >= PACK_BELOW_BYTES
    piece = keep(part, part.nbytes)
    assert isinstance(piece, Packed)
    assert held_bytes(piece, part.nbytes) <= 1.2 * part.nbytes
    assert tables([piece])[0].equals(part)


def test_quarantine_rows_round_trip():
    table = quarantine_table("topic", 3, "fs", [5, 9], [1000, 2000], [b"k", None],
                             [b"\x00\x01frame", None], ["bad_body", "no_value"], ["why", ""])
    [back] = tables([keep(table.slice(1, 1), table.slice(1, 1).nbytes)])
    assert back.equals(table.slice(1, 1))


def test_node_count_sees_nested_children():
    nested = pa.schema([("a", pa.struct([("x", pa.int32()), ("y", pa.list_(pa.string()))]))])
    assert held_rows._nodes(nested) == 4  # struct, x, list, list item
