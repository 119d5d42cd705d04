"""The Garmadon frame: a 20-byte big-endian head, a Header protobuf, a body protobuf.

::

    bytes 0-3    int32  type marker            (events.REGISTRY)
    bytes 4-11   int64  event timestamp, epoch ms (decides the UTC day)
    bytes 12-15  int32  header length H
    bytes 16-19  int32  body length B
    bytes 20..20+H      Header; then B bytes of body

A record is a frame only if ``len(value) == 20 + H + B`` with H, B >= 0. Records that are
not frames are values, never exceptions: :class:`DecodeFailure` with a :class:`Reason`,
which the exporter counts and quarantines. :func:`read_head` is the per-record gate of the
reader and parses no protobuf; :func:`decode` parses both messages of one frame (tools,
tests); batches of frames go through ``columns.decode_batch``.

An empty value has its own reason (``empty_value``) rather than ``short_head``: a zero-length
record is a producer sending nothing (a tombstone-like record), a short one is a truncation,
and operators look for different culprits.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from google.protobuf.message import DecodeError, Message

from garmexport.wire.events import HEADER, REGISTRY

HEAD = struct.Struct(">iqii")
HEAD_SIZE = HEAD.size  # 20
_unpack_head = HEAD.unpack_from
_pack_head = HEAD.pack


class Reason(str, enum.Enum):
    """Why a record is not an exportable event; the value is the metric/quarantine label."""

    NULL_VALUE = "null_value"
    EMPTY_VALUE = "empty_value"
    SHORT_HEAD = "short_head"
    LENGTH_MISMATCH = "length_mismatch"
    UNKNOWN_MARKER = "unknown_marker"
    BAD_HEADER = "bad_header"
    BAD_BODY = "bad_body"
    TIMESTAMP_OUT_OF_WINDOW = "timestamp_out_of_window"  # decided by the exporter, not here


@dataclass(frozen=True)
class DecodeFailure:
    """A record that cannot be exported: the reason and a human detail for the quarantine."""

    reason: Reason
    detail: str


@dataclass(frozen=True)
class Frame:
    """A decoded frame: parsed header and body messages (body class from the registry)."""

    marker: int
    timestamp_ms: int
    header: Message
    body: Message


_NULL = DecodeFailure(Reason.NULL_VALUE, "record value is null")
_EMPTY = DecodeFailure(Reason.EMPTY_VALUE, "record value is empty")


def read_head(value: bytes | None) -> tuple[int, int, int, int] | DecodeFailure:
    """Check a record's head: (marker, timestamp_ms, header_len, body_len) or a failure.

    Checks, in order: null, empty, shorter than 20 bytes, lengths negative or not adding up to
    exactly ``len(value)`` (both too few and too many bytes), unknown marker. Never raises for
    any bytes; does not parse protobuf (so BAD_HEADER/BAD_BODY cannot come from here).
    """
    if value is None:
        return _NULL
    size = len(value)
    if size < HEAD_SIZE:
        if size == 0:
            return _EMPTY
        return DecodeFailure(Reason.SHORT_HEAD, f"{size} bytes, a frame head needs {HEAD_SIZE}")
    head = _unpack_head(value)
    header_len, body_len = head[2], head[3]
    if header_len < 0 or body_len < 0 or HEAD_SIZE + header_len + body_len != size:
        return DecodeFailure(
            Reason.LENGTH_MISMATCH,
            f"head says {HEAD_SIZE}+{header_len}+{body_len} bytes, record has {size}",
        )
    if head[0] not in REGISTRY:
        return unknown_marker(head[0])
    return head


def unknown_marker(marker: int) -> DecodeFailure:
    """The failure of a frame whose type marker this version does not know."""
    return DecodeFailure(Reason.UNKNOWN_MARKER, f"unknown type marker {marker}")


def encode(
    marker: int, timestamp_ms: int, header: bytes | Message, body: bytes | Message
) -> bytes:
    """Build the exact frame bytes; messages are serialized with ``SerializeToString``.

    Raises struct.error when marker or timestamp do not fit int32/int64. The marker is not
    checked against the registry, so tests and the generator can build unknown-marker frames.
    """
    header_bytes = header if isinstance(header, bytes) else header.SerializeToString()
    body_bytes = body if isinstance(body, bytes) else body.SerializeToString()
    return (
        _pack_head(marker, timestamp_ms, len(header_bytes), len(body_bytes))
        + header_bytes
        + body_bytes
    )


def decode(value: bytes | None) -> Frame | DecodeFailure:
    """Decode one record fully; failures are returned, never raised, whatever the bytes."""
    head = read_head(value)
    if isinstance(head, DecodeFailure):
        return head
    assert value is not None  # read_head returned a head, so value is bytes
    marker, timestamp_ms, header_len, _ = head
    split = HEAD_SIZE + header_len
    try:
        header = HEADER.FromString(value[HEAD_SIZE:split])
    except DecodeError as exc:
        return DecodeFailure(Reason.BAD_HEADER, str(exc))
    try:
        body = REGISTRY[marker].message.FromString(value[split:])
    except DecodeError as exc:
        return DecodeFailure(Reason.BAD_BODY, str(exc))
    return Frame(marker, timestamp_ms, header, body)
