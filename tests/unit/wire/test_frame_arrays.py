"""Frames cut into Arrow arrays over whole columns: the same cut as the per-frame reader."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.wire import frame_arrays, frames
from tests.hypothesis_profiles import examples

frame_parts = st.tuples(
    st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=300), st.binary(max_size=300))


def frame(marker: int, stamp: int, header: bytes, body: bytes) -> bytes:
    return struct.pack(">iqii", marker, stamp, len(header), len(body)) + header + body


@settings(max_examples=examples(200), deadline=None)
@given(parts=st.lists(frame_parts, min_size=1, max_size=40), skip=st.integers(0, 3))
def test_split_cuts_every_frame_into_its_time_header_and_body(parts, skip):
    values = [b"padding " * 3] * skip + [frame(*p) for p in parts]
    # a slice too: the array's offset is not 0 and its buffers hold other values
    array = frame_arrays.frames_array(values).slice(skip)
    stamps, headers, bodies = frame_arrays.split(array)
    assert stamps.tolist() == [p[1] for p in parts]
    assert headers.to_pylist() == [p[2] for p in parts]
    assert bodies.to_pylist() == [p[3] for p in parts]
    # and it agrees with the wire format's head, read one frame at a time
    for value, stamp, header in zip(values[skip:], stamps.tolist(), headers.to_pylist()):
        _, head_stamp, header_len, _ = frames.HEAD.unpack_from(value)
        assert (stamp, len(header)) == (head_stamp, header_len)


def test_an_empty_batch_splits_into_empty_arrays():
    stamps, headers, bodies = frame_arrays.split(frame_arrays.frames_array([]))
    assert len(stamps) == len(headers) == len(bodies) == 0


@pytest.mark.parametrize("bad", [None, b"", b"\x00" * 19])
def test_a_value_that_cannot_be_a_frame_is_refused_not_misread(bad):
    values = [frame(1, 2, b"h", b"b"), bad]
    with pytest.raises(ValueError, match="shorter than a frame head"):
        frame_arrays.split(pa.array(values, pa.binary()))


@settings(max_examples=examples(200), deadline=None)
@given(parts=st.lists(frame_parts, min_size=1, max_size=40), skip=st.integers(0, 3),
       data=st.data())
def test_split_in_an_order_gives_the_frames_at_those_indexes_in_that_order(parts, skip, data):
    """The writer decodes a batch in (day, offset) order: split picks the frames in that
    order, as splitting the reordered frames would."""
    values = [b"padding " * 3] * skip + [frame(*p) for p in parts]
    array = frame_arrays.frames_array(values).slice(skip)
    order = data.draw(st.lists(st.integers(0, len(parts) - 1), max_size=len(parts), unique=True))
    stamps, headers, bodies = frame_arrays.split(array, np.array(order, np.int64))
    assert stamps.dtype == np.int64
    assert stamps.tolist() == [parts[i][1] for i in order]
    assert headers.to_pylist() == [parts[i][2] for i in order]
    assert bodies.to_pylist() == [parts[i][3] for i in order]


@settings(max_examples=examples(100), deadline=None)
@given(parts=st.lists(frame_parts, min_size=1, max_size=20), gap=st.binary(max_size=30))
def test_read_heads_reads_each_head_where_it_starts(parts, gap):
    values = [frame(*p) for p in parts]
    data, starts = b"", []
    for value in values:
        data += gap
        starts.append(len(data))
        data += value
    heads = frame_arrays.read_heads(np.frombuffer(data, np.uint8), np.array(starts, np.int32))
    assert [tuple(int(x) for x in h) for h in heads] == [frames.HEAD.unpack_from(v) for v in values]
    assert len(frame_arrays.read_heads(np.frombuffer(data, np.uint8), np.zeros(0, np.int32))) == 0
