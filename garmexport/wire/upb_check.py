"""Which protobuf payloads upb rejects: the judge of a bad header or body.

upb (the generated classes) parses a whole batch as one wrapper message
``repeated T item = 1``, which gives the same verdict as parsing each payload alone; if
the batch fails, bisection finds the bad payloads. The decoder (``columns``) asks it before
ptars converts anything, since ptars accepts some corrupt messages upb rejects.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.internal.encoder import _VarintBytes
from google.protobuf.message import DecodeError, Message

from garmexport.wire.events import EXPORTED, HEADER
from garmexport.wire.frames import DecodeFailure, Reason

_F = FieldDescriptor
_LINEAR_BELOW = 32  # bisection stops and parses record by record below this many records
_JOIN, _BINARY_LENGTH = map(pc.get_function, ("binary_join_element_wise", "binary_length"))
_NO_SEPARATOR = pa.scalar(b"", pa.binary())


def find_bad(
    message: type[Message], payloads: pa.BinaryArray, reason: Reason
) -> list[tuple[int, DecodeFailure]]:
    """Indexes of payloads upb cannot parse as ``message``, with upb's error text."""
    n = len(payloads)
    if n == 0:
        return []
    wrapper = _wrappers()[message.DESCRIPTOR.full_name]
    # the wrapper message: per payload, an item head (field 1's tag, the length as varint)
    # and the payload; joined element-wise in Arrow, so item i spans cuts[i]..cuts[i + 1]
    items = _JOIN.call([_prefixes(_BINARY_LENGTH.call([payloads])), payloads, _NO_SEPARATOR])
    _, cuts_buf, data_buf = items.buffers()
    cuts = np.frombuffer(cuts_buf, np.int32, n + 1, items.offset * 4)
    base = int(cuts[0])
    whole = data_buf[base:int(cuts[-1])].to_pybytes() if data_buf is not None else b""
    found: list[tuple[int, DecodeFailure]] = []
    # Bisection with an explicit stack of ranges, taken in index order. (A recursive inner
    # function would be a reference cycle per call, holding every payload until the
    # cyclic garbage collector runs.)
    todo = [(0, n)]
    while todo:
        lo, hi = todo.pop()
        if hi - lo >= _LINEAR_BELOW:
            try:
                wrapper.FromString(whole[cuts[lo] - base : cuts[hi] - base])
            except DecodeError:
                mid = (lo + hi) // 2
                todo += ((mid, hi), (lo, mid))
            continue
        for i in range(lo, hi):
            try:
                message.FromString(payloads[i].as_py())
            except DecodeError as exc:
                found.append((i, DecodeFailure(reason, str(exc))))
    return found


@functools.cache
def _prefix_table() -> pa.BinaryArray:
    return pa.array([b"\x0a" + _VarintBytes(n) for n in range(1 << 14)], pa.binary())


def _prefixes(lengths: pa.Int32Array) -> pa.BinaryArray:
    """Per payload length, tag of field 1 (length delimited) and the varint length."""
    try:
        return _prefix_table().take(lengths)
    except IndexError:  # a payload of 16 KiB or more
        return pa.array([b"\x0a" + _VarintBytes(n) for n in lengths.to_pylist()], pa.binary())


@functools.cache
def _wrappers() -> dict[str, type[Message]]:
    """Message full name -> generated class of ``message Batch { repeated T item = 1; }``."""
    targets = [HEADER.DESCRIPTOR] + [t.message.DESCRIPTOR for t in EXPORTED]
    proto = descriptor_pb2.FileDescriptorProto(
        name="garmexport/_batch_wrappers.proto",
        package="garmexport.batch",
        syntax="proto3",
        dependency=sorted({d.file.name for d in targets}),
    )
    for i, target in enumerate(targets):
        wrapper = proto.message_type.add(name=f"Batch{i}")
        wrapper.field.add(
            name="item", number=1, label=_F.LABEL_REPEATED, type=_F.TYPE_MESSAGE,
            type_name="." + target.full_name,
        )  # fmt: skip
    pool = descriptor_pool.Default()
    pool.Add(proto)
    return {
        target.full_name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"garmexport.batch.Batch{i}")
        )
        for i, target in enumerate(targets)
    }
