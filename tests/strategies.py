"""Hypothesis strategies shared across test files: events, frames, malformed records.

* :func:`messages` draws any valid message of a registry class from its descriptor, leaning
  on the values that break things: proto3 defaults, extremes of every integer width,
  non-ASCII text, NaN and signed zeros, empty lists, enum numbers the enum does not declare.
  ``JVMStatisticsData`` gets its own strategy (heap sections and numeric texts).
* :func:`frames` draws ``(marker, timestamp_ms, header, body)`` of one type.
* :func:`malformed_frames` draws ``(value, reason)`` for every kind of bad record.
* :func:`mutated_frames` draws frames whose header or body bytes were damaged at random but
  whose head is consistent, for comparing decoders on arbitrary payloads.
"""

from __future__ import annotations

import struct

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from hypothesis import strategies as st

from garmexport.wire.events import EXPORTED, HEADER, REGISTRY, EventType

_F = FieldDescriptor


def _ints(bits: int, signed: bool = True) -> st.SearchStrategy[int]:
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    edges = sorted({0, 1, lo, hi, hi // 2 + 1} | ({-1} if signed else set()))
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


texts = st.one_of(
    st.just(""),
    st.sampled_from(["SPARK", "application_1700000000000_0001", "é", "日本語", "\x00", " "]),
    st.text(max_size=12),
)

_SCALARS = {
    _F.TYPE_STRING: texts,
    _F.TYPE_INT32: _ints(32),
    _F.TYPE_INT64: _ints(64),
    _F.TYPE_UINT64: _ints(64, signed=False),
    _F.TYPE_FLOAT: st.floats(width=32),
    _F.TYPE_DOUBLE: st.floats(),
    _F.TYPE_BOOL: st.booleans(),
}


def _field_values(field: FieldDescriptor) -> st.SearchStrategy[object]:
    if field.is_repeated:
        return st.lists(texts, max_size=4)
    if field.type == _F.TYPE_ENUM:
        declared = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(declared), _ints(32))  # open enum: any int32
    return _SCALARS[field.type]


numeric_texts = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.sampled_from(
        ["0", "-0", "0012", "9223372036854775807", "-9223372036854775808",
         "9223372036854775808", "99999999999999999999", "", " 12", "12 ", "+5", "12\n",
         "1_000", "1e3", "12.5", "abc", "\u0661\u0662", "-"]
    ),
)  # fmt: skip


def _jvm_statistics(message: type[Message]) -> st.SearchStrategy[Message]:
    section, prop = message.Section, message.Property
    properties = st.builds(
        prop,
        name=st.sampled_from(["init", "committed", "used", "max", "other", "", "Used"]),
        value=numeric_texts,
    )
    sections = st.builds(
        section,
        name=st.sampled_from(["heap", "nonheap", "", "heap ", "gc"]),
        property=st.lists(properties, max_size=6),
    )
    return st.builds(message, section=st.lists(sections, max_size=3))


def messages(message: type[Message]) -> st.SearchStrategy[Message]:
    """Any valid message of ``message`` (a registry class or the Header)."""
    if message.DESCRIPTOR.name == "JVMStatisticsData":
        return _jvm_statistics(message)
    fields = {f.name: _field_values(f) for f in message.DESCRIPTOR.fields}
    return st.fixed_dictionaries(fields).map(lambda kwargs: message(**kwargs))


def headers() -> st.SearchStrategy[Message]:
    return messages(HEADER)


timestamps_ms = _ints(64)
exported_types = st.sampled_from(EXPORTED)


def frames(event_type: EventType) -> st.SearchStrategy[tuple[int, int, Message, Message]]:
    """``(marker, timestamp_ms, header, body)`` of one valid event of ``event_type``."""
    return st.tuples(
        st.just(event_type.marker), timestamps_ms, headers(), messages(event_type.message)
    )


def stamped_bodies(event_type: EventType) -> st.SearchStrategy[tuple[int, Message]]:
    """``(timestamp_ms, body)`` of one valid event of ``event_type``: a frame without its
    header, for batches that share a few headers (a header is the costliest part to draw)."""
    return st.tuples(timestamps_ms, messages(event_type.message))


def _head(marker: int, timestamp_ms: int, header_len: int, body_len: int) -> bytes:
    return struct.pack(">iqii", marker, timestamp_ms, header_len, body_len)


def _parses(message: type[Message], payload: bytes) -> bool:
    try:
        message.FromString(payload)
    except DecodeError:
        return False
    return True


#: Payloads that upb rejects, including some the Rust converter would accept or panic on.
KNOWN_BAD_PAYLOADS = (
    b"\xff",                                      # varint cut short
    b"\x0a\x05ab",                                # length beyond the end
    b"\x00\x01",                                  # field number 0
    b"\x0c",                                      # end-group without a start
    b"\x0e",                                      # wire type 6
    b"\x5b\x44",                                  # group closed by another field's end-group
    b"\xf8\xff\xff\xff\x1f\x01",                  # field number >= 2**29
    b"\x0a\x01x\x1a\xfd\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # length that wraps negative
    b"\x80\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",   # 11-byte varint
)  # fmt: skip
_BAD_UTF8 = (b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xff", b"a\x80")


def bad_payloads(message: type[Message]) -> st.SearchStrategy[bytes]:
    """Bytes that do not parse as ``message``: corrupt wire format or invalid UTF-8."""
    string_tags = [
        bytes([f.number << 3 | 2])
        for f in message.DESCRIPTOR.fields
        if f.type == _F.TYPE_STRING and f.number < 16
    ]
    bad_utf8 = (
        st.tuples(st.sampled_from(string_tags), st.sampled_from(_BAD_UTF8)).map(
            lambda t: t[0] + bytes([len(t[1])]) + t[1]
        )
        if string_tags
        else st.nothing()
    )
    return st.one_of(
        st.sampled_from(KNOWN_BAD_PAYLOADS), bad_utf8, st.binary(min_size=1, max_size=12)
    ).filter(lambda payload: not _parses(message, payload))


#: the kinds of bad record a frame's head shows (what routing sees); the two others have a good
#: head and a payload that does not parse
HEAD_KINDS = ("null_value", "empty_value", "short_head", "length_mismatch", "negative_length",
              "unknown_marker")


@st.composite
def malformed_frames(draw: st.DrawFn, heads_only: bool = False) -> tuple[bytes | None, str]:
    """``(value, reason value)`` for every kind of record that is not an exportable event.

    With ``heads_only``, only the kinds a frame's head shows, around payloads of any bytes:
    for the router, which reads no protobuf (drawing valid messages is most of the cost of
    a property test over polls of many records).
    """
    kinds = HEAD_KINDS if heads_only else (*HEAD_KINDS, "bad_header", "bad_body")
    kind = draw(st.sampled_from(kinds))
    if kind == "null_value":
        return None, kind
    if kind == "empty_value":
        return b"", kind
    if kind == "short_head":
        return draw(st.binary(min_size=1, max_size=19)), kind
    event_type = draw(exported_types)
    if heads_only:
        header, body = draw(st.binary(max_size=40)), draw(st.binary(max_size=80))
    else:
        header = draw(headers()).SerializeToString()
        body = draw(messages(event_type.message)).SerializeToString()
    stamp = draw(timestamps_ms)
    payload = header + body
    if kind == "length_mismatch":  # bytes missing or left over, in head or in payload
        delta = draw(st.integers(-len(payload) - 19, 40).filter(lambda d: d != 0))
        value = _head(event_type.marker, stamp, len(header), len(body)) + payload
        value = value[:delta] if delta < 0 else value + bytes(delta)
        return value, "short_head" if len(value) < 20 else "length_mismatch"  # never empty
    if kind == "negative_length":  # a negative length that still adds up to the size
        shift = draw(st.integers(1, 2**31 - 1 - len(payload)))
        if draw(st.booleans()):
            head = _head(event_type.marker, stamp, -shift, len(payload) + shift)
        else:
            head = _head(event_type.marker, stamp, len(payload) + shift, -shift)
        return head + payload, "length_mismatch"
    if kind == "unknown_marker":
        marker = draw(st.integers(-(2**31), 2**31 - 1).filter(lambda m: m not in REGISTRY))
        return _head(marker, stamp, len(header), len(body)) + payload, kind
    if kind == "bad_header":
        header = draw(bad_payloads(HEADER))
        return _head(event_type.marker, stamp, len(header), len(body)) + header + body, kind
    body = draw(bad_payloads(event_type.message))
    return _head(event_type.marker, stamp, len(header), len(body)) + header + body, kind


def _mutated(payload: bytes) -> st.SearchStrategy[bytes]:
    edits = st.lists(
        st.tuples(
            st.sampled_from(["set", "insert", "delete", "truncate"]),
            st.integers(0, 1 << 16),
            st.integers(0, 255),
        ),
        min_size=1,
        max_size=3,
    )

    def apply(steps: list[tuple[str, int, int]]) -> bytes:
        data = bytearray(payload)
        for op, where, byte in steps:
            at = where % (len(data) + 1)
            if op == "insert":
                data.insert(at, byte)
            elif op == "truncate":
                del data[at:]
            elif data and at < len(data):
                if op == "set":
                    data[at] = byte
                else:
                    del data[at]
        return bytes(data)

    return edits.map(apply)


@st.composite
def mutated_frames(draw: st.DrawFn, event_type: EventType) -> bytes:
    """A frame of ``event_type`` with a consistent head; header or body may be damaged."""
    _, stamp, header, body = draw(frames(event_type))
    header_bytes, body_bytes = header.SerializeToString(), body.SerializeToString()
    target = draw(st.sampled_from(["none", "header", "body"]))
    if target == "header":
        header_bytes = draw(_mutated(header_bytes))
    elif target == "body":
        body_bytes = draw(_mutated(body_bytes))
    head = _head(event_type.marker, stamp, len(header_bytes), len(body_bytes))
    return head + header_bytes + body_bytes
