"""Which protobuf payloads upb rejects: the judge of a bad header or body.

upb (the generated classes) parses a range of payloads as one wrapper message
``repeated T item = 1``, which gives the same verdict as parsing each payload alone. A
batch is checked as ranges of :data:`_FIRST_RANGE` payloads; a failing range is cut into
:data:`_PARTS` parts, each checked again, until single payloads are judged alone. With a
few bad payloads in a batch (the usual case at realistic bad-record rates) this re-parses
about a tenth of the batch, where halving the failing range re-parsed it twice over.
The decoder (``columns``) asks it before ptars converts anything, since ptars accepts
some corrupt messages upb rejects.
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
#: payloads per range checked first: a batch is parsed as a few wrapper messages of this
#: many items, so a bad payload costs a re-parse of its range, not of half the batch
_FIRST_RANGE = 512
#: a failing range is cut into this many parts, each checked again; a failing range of at
#: most this many payloads is checked payload by payload
_PARTS = 16
_JOIN, _BINARY_LENGTH = map(pc.get_function, ("binary_join_element_wise", "binary_length"))
_NO_SEPARATOR = pa.scalar(b"", pa.binary())


def find_bad(
    message: type[Message], payloads: pa.BinaryArray, reason: Reason
) -> list[tuple[int, DecodeFailure]]:
    """Indexes of payloads upb cannot parse as ``message``, with upb's error text, in
    index order.

    A range of payloads that parses as one wrapper message holds no bad payload; a payload
    is bad when ``message.FromString`` rejects it alone.
    """
    n = len(payloads)
    if n == 0:
        return []
    wrapper = _wrappers()[message.DESCRIPTOR.full_name]
    # the wrapper message: per payload, an item head (field 1's tag, the length as varint)
    # and the payload; joined element-wise in Arrow, so item i spans cuts[i]..cuts[i + 1]
    lengths = _BINARY_LENGTH.call([payloads])
    items = _JOIN.call([_prefixes(lengths), payloads, _NO_SEPARATOR])
    sizes = lengths.to_numpy()
    _, cuts_buf, data_buf = items.buffers()
    cuts = np.frombuffer(cuts_buf, np.int32, n + 1, items.offset * 4)
    # zero-copy views of the joined bytes: a slice costs nothing however long
    whole = memoryview(data_buf if data_buf is not None else b"")
    found: list[tuple[int, DecodeFailure]] = []
    # An explicit stack of ranges, taken in index order. (A recursive inner function would
    # be a reference cycle per call, holding every payload until the cyclic garbage
    # collector runs.)
    todo = [(lo, min(lo + _FIRST_RANGE, n)) for lo in range(0, n, _FIRST_RANGE)][::-1]
    while todo:
        lo, hi = todo.pop()
        if hi - lo == 1:  # one payload, judged alone (its item ends with it)
            end = int(cuts[hi])
            try:
                message.FromString(whole[end - int(sizes[lo]) : end].tobytes())
            except DecodeError as exc:
                found.append((lo, DecodeFailure(reason, str(exc))))
            continue
        try:
            wrapper.FromString(whole[cuts[lo] : cuts[hi]])
        except DecodeError:  # a bad payload in the range: check its parts
            step = 1 if hi - lo <= _PARTS else -(-(hi - lo) // _PARTS)
            todo += [(a, min(a + step, hi)) for a in range(lo, hi, step)][::-1]
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
