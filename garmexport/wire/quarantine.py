"""Records that cannot be exported, kept whole with their Kafka coordinates and reason.

A quarantined record is held, not lost (DESIGN.md 5): the raw value, key and Kafka
coordinates go to ``_quarantine/day=<day of the Kafka timestamp>/`` through the same
commit protocol as data. The day comes from the Kafka timestamp because a bad record may
have no readable event time, and it must be the same on every replay (a chain's day must
not depend on when the record is processed).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("kafka_partition", pa.int32()),
    ("kafka_offset", pa.int64()),
    ("kafka_timestamp", pa.int64()),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("origin", pa.string()),
    ("reason", pa.string()),
    ("detail", pa.string()),
])


def quarantine_table(
    topic: str,
    partition: int,
    origin: str,
    offsets: Sequence[int],
    kafka_timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    reasons: Sequence[str],
    details: Sequence[str],
) -> pa.Table:
    """Rows for quarantined records, in the order given (offset order)."""
    n = len(offsets)
    return pa.Table.from_arrays(
        [
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(kafka_timestamps, pa.int64()),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([origin] * n, pa.string()),
            pa.array(reasons, pa.string()),
            pa.array(details, pa.string()),
        ],
        schema=SCHEMA,
    )
