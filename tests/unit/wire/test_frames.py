"""Frames: exact big-endian layout, and every kind of bad record classified, never raised."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.wire.events import EXPORTED, HEADER, REGISTRY
from garmexport.wire.frames import HEAD_SIZE, DecodeFailure, Frame, Reason, decode, encode, read_head
from tests import strategies as gs
from tests.hypothesis_profiles import examples


def hand_built(marker: int, timestamp_ms: int, header: bytes, body: bytes) -> bytes:
    return struct.pack(">i", marker) + struct.pack(">q", timestamp_ms) + struct.pack(
        ">i", len(header)
    ) + struct.pack(">i", len(body)) + header + body


@pytest.mark.parametrize("event_type", EXPORTED, ids=lambda t: t.name)
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_encoded_frame_is_byte_identical_to_a_hand_built_one(event_type, data):
    marker, stamp, header, body = data.draw(gs.frames(event_type))
    expected = hand_built(marker, stamp, header.SerializeToString(), body.SerializeToString())
    assert encode(marker, stamp, header, body) == expected
    assert encode(marker, stamp, header.SerializeToString(), body.SerializeToString()) == expected


def test_head_layout_is_marker_timestamp_header_length_body_length_big_endian():
    value = encode(1001, 0x0102030405060708, b"\xaa" * 3, b"\xbb" * 2)
    assert value[:20] == bytes.fromhex("000003e9" "0102030405060708" "00000003" "00000002")
    assert value[20:] == b"\xaa\xaa\xaa\xbb\xbb"
    assert read_head(value) == (1001, 0x0102030405060708, 3, 2)


@pytest.mark.parametrize("event_type", EXPORTED, ids=lambda t: t.name)
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_decode_returns_the_messages_that_were_encoded(event_type, data):
    marker, stamp, header, body = data.draw(gs.frames(event_type))
    frame = decode(encode(marker, stamp, header, body))
    assert isinstance(frame, Frame)
    assert (frame.marker, frame.timestamp_ms) == (marker, stamp)
    assert frame.header.SerializeToString() == header.SerializeToString()
    assert frame.body.SerializeToString() == body.SerializeToString()
    assert type(frame.body) is event_type.message


@pytest.mark.parametrize("marker", [0, 3])
def test_known_but_unexported_markers_decode(marker):
    frame = decode(encode(marker, 1, HEADER(application_id="a"), REGISTRY[marker].message()))
    assert isinstance(frame, Frame) and frame.marker == marker


@settings(deadline=None)  # drawing from a filtered strategy can be slow on a busy machine
@given(gs.malformed_frames())
def test_every_kind_of_malformed_record_is_classified_with_its_reason(case):
    value, reason = case
    result = decode(value)
    assert isinstance(result, DecodeFailure)
    assert result.reason == Reason(reason)
    if reason not in ("bad_header", "bad_body"):
        assert read_head(value) == result  # the cheap gate already says it


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, Reason.NULL_VALUE),
        (b"", Reason.EMPTY_VALUE),
        (b"\x00" * 19, Reason.SHORT_HEAD),
        (encode(1, 5, b"ab", b"c")[:-1], Reason.LENGTH_MISMATCH),  # a byte missing
        (encode(1, 5, b"ab", b"c") + b"\x00", Reason.LENGTH_MISMATCH),  # a byte left over
        (struct.pack(">iqii", 1, 5, -1, 4) + b"abc", Reason.LENGTH_MISMATCH),  # adds up, < 0
        (encode(2, 5, b"", b""), Reason.UNKNOWN_MARKER),
        (encode(1, 5, b"\x0a\x05ab", b""), Reason.BAD_HEADER),
        (encode(1, 5, b"", b"\x0a\x02\xc0\x80"), Reason.BAD_BODY),  # invalid UTF-8 in src_path
    ],
)
def test_examples_of_each_reason(value, reason):
    result = decode(value)
    assert isinstance(result, DecodeFailure) and result.reason is reason and result.detail


def test_length_check_comes_before_the_marker_lookup():
    assert read_head(encode(2, 5, b"ab", b"")[:-1]).reason is Reason.LENGTH_MISMATCH


@given(st.one_of(st.none(), st.binary(max_size=64)))
def test_read_head_and_decode_never_raise(value):
    head = read_head(value)
    assert isinstance(head, (tuple, DecodeFailure))
    assert isinstance(decode(value), (Frame, DecodeFailure))


@settings(deadline=None)
@given(gs.exported_types.flatmap(gs.mutated_frames))
def test_decode_classifies_damaged_payloads_without_raising(value):
    result = decode(value)
    if isinstance(result, DecodeFailure):
        assert result.reason in (Reason.BAD_HEADER, Reason.BAD_BODY)


def test_reasons_are_snake_case_labels():
    assert [r.value for r in Reason] == [
        "null_value", "empty_value", "short_head", "length_mismatch", "unknown_marker",
        "bad_header", "bad_body", "timestamp_out_of_window",
    ]  # fmt: skip
    assert Reason.BAD_BODY == "bad_body"  # usable directly as a metric label


def test_encode_rejects_a_marker_that_does_not_fit_int32():
    with pytest.raises(struct.error):
        encode(2**31, 0, b"", b"")


def test_head_size_is_twenty_bytes():
    assert HEAD_SIZE == 20
