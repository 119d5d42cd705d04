"""The explicit Arrow schema of each dataset: the row layout every decoder produces.

Row layout (:func:`schema_for`): header fields, body fields (or, for JVMSTATS, the
flattened heap section), then ``timestamp`` int64 (frame ms), ``kafka_partition`` int32,
``kafka_offset`` int64. Every column is nullable. Both decoders (``columns``, the native
one, and ``columns_reference``, the readable one) build exactly these schemas.
"""

from __future__ import annotations

import functools

import pyarrow as pa
from google.protobuf.descriptor import FieldDescriptor

from garmexport.wire.events import HEADER, EventType

_F = FieldDescriptor
STRING_LIST = pa.list_(pa.field("item", pa.string(), nullable=False))
TRAILER = (
    pa.field("timestamp", pa.int64()),
    pa.field("kafka_partition", pa.int32()),
    pa.field("kafka_offset", pa.int64()),
)
_SCALARS = {
    _F.TYPE_STRING: pa.string(), _F.TYPE_INT32: pa.int32(), _F.TYPE_INT64: pa.int64(),
    _F.TYPE_UINT64: pa.int64(), _F.TYPE_FLOAT: pa.float32(), _F.TYPE_DOUBLE: pa.float64(),
    _F.TYPE_BOOL: pa.bool_(), _F.TYPE_ENUM: pa.string(),
}  # fmt: skip


def arrow_type(field: FieldDescriptor) -> pa.DataType:
    """Column type of a scalar or repeated-string protobuf field; TypeError for the rest."""
    if field.is_repeated:
        if field.type == _F.TYPE_STRING:
            return STRING_LIST
    elif field.type in _SCALARS:
        return _SCALARS[field.type]
    raise TypeError(f"no column type for protobuf field {field.full_name}")


@functools.cache
def schema_for(event_type: EventType) -> pa.Schema:
    """The explicit Arrow schema of ``event_type``'s dataset (see the module docstring)."""
    fields = [pa.field(f.name, arrow_type(f)) for f in HEADER.DESCRIPTOR.fields]
    if event_type.flatten is not None:
        fields += [pa.field(p, pa.int64()) for p in event_type.flatten.properties]
    else:
        fields += [pa.field(f.name, arrow_type(f)) for f in event_type.message.DESCRIPTOR.fields]
    return pa.schema(fields + list(TRAILER))
