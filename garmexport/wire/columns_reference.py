"""Plain-Python reference decoder: the readable statement of what ``columns`` computes.

Same signature and same output as :func:`garmexport.wire.columns.decode_batch` (property tests
compare them row for row), written the obvious way: parse each record with the generated
classes, read each field with ``getattr``, apply the value rules of the ``columns`` module
docstring in Python, build Arrow arrays from Python lists. About ten times slower; used by
tests, by the benchmark, and by ``columns`` as a fallback should the native converter fail on
messages upb accepted.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from garmexport.wire.events import HEADER, EventType, SectionFlattening
from garmexport.wire.frames import DecodeFailure, Reason
from garmexport.wire.schema import schema_for

_F = FieldDescriptor
_INT = re.compile(r"-?[0-9]{1,19}")
_head = struct.Struct(">qii").unpack_from


def decode_batch(
    event_type: EventType, values: Sequence[bytes], partition: int, offsets: Sequence[int]
) -> tuple[pa.Table, list[tuple[int, DecodeFailure]]]:
    """See :func:`garmexport.wire.columns.decode_batch`; same contract, same result."""
    schema = schema_for(event_type)
    rows: list[list[Any]] = []
    failures: list[tuple[int, DecodeFailure]] = []
    for index, (value, offset) in enumerate(zip(values, offsets, strict=True)):
        timestamp_ms, header_len, _ = _head(value, 4)
        try:
            header = HEADER.FromString(value[20 : 20 + header_len])
        except DecodeError as exc:
            failures.append((index, DecodeFailure(Reason.BAD_HEADER, str(exc))))
            continue
        try:
            body = event_type.message.FromString(value[20 + header_len :])
        except DecodeError as exc:
            failures.append((index, DecodeFailure(Reason.BAD_BODY, str(exc))))
            continue
        row = _fields(header)
        if event_type.flatten is not None:
            row += _section(body, event_type.flatten)
        else:
            row += _fields(body)
        rows.append([*row, timestamp_ms, partition, offset])
    columns = [pa.array(list(col), f.type) for col, f in zip(zip(*rows), schema)] if rows else []
    table = pa.Table.from_arrays(columns, schema=schema) if rows else schema.empty_table()
    return table, failures


def _fields(message: Message) -> list[Any]:
    return [_value(field, getattr(message, field.name)) for field in message.DESCRIPTOR.fields]


def _value(field: FieldDescriptor, value: Any) -> Any:
    """One field as a column value: proto3 defaults become None."""
    if field.is_repeated:
        return list(value) or None
    if not value:  # "", 0, 0.0, -0.0, False, enum number 0
        return None
    if field.type == _F.TYPE_ENUM:
        symbol = field.enum_type.values_by_number.get(value)
        return symbol.name if symbol is not None else str(value)
    if field.type == _F.TYPE_UINT64 and value >= 2**63:
        return value - 2**64  # same 64 bits as int64
    return value


def _section(body: Message, spec: SectionFlattening) -> list[int | None]:
    texts: dict[str, str] = {}
    for section in body.section:
        if section.name == spec.section:
            for prop in section.property:
                texts[prop.name] = prop.value  # last occurrence wins
    return [_int64(texts.get(name)) for name in spec.properties]


def _int64(text: str | None) -> int | None:
    if text is None or not _INT.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None
