"""A batch of frames as Arrow arrays: event times, header bytes and body bytes.

The decoder used to cut every frame in Python (unpack the head, slice the header, slice the
body): two new ``bytes`` and three appends per record, a fifth of its time. Here the frames
are copied once into one Arrow binary array, and the rest runs over whole columns:

* the 20-byte heads are gathered into one buffer and read as big-endian integers (numpy);
* the header and body of each frame are elements of a second, zero-copy binary array over
  the same bytes, whose offsets cut every frame in three (head, header, body); taking every
  third element gives contiguous header and body arrays, which ptars reads as they are.

Frames must be whole (``frames.read_head`` accepted them: at least 20 bytes, lengths that
add up); the reader routes every other record to the quarantine before it gets here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from garmexport.wire.frames import HEAD_SIZE

#: the frame head: type marker, event time (ms), header length, body length
HEAD_DTYPE = np.dtype([("marker", ">i4"), ("timestamp", ">i8"), ("header", ">i4"), ("body", ">i4")])
#: the frames of one array stay under 1 GiB: ptars reads 32-bit offsets only (2 GiB), and
#: the upb check's wrapper message adds an item head to every payload
MAX_ARRAY_BYTES = 1 << 30


def frames_array(values: Sequence[bytes]) -> pa.BinaryArray | None:
    """The frames in one binary array, or None if more than one frame and over
    :data:`MAX_ARRAY_BYTES` (the caller splits them)."""
    frames = pa.array(values, pa.binary())  # chunked if it overflowed 2 GiB
    if len(values) > 1 and (isinstance(frames, pa.ChunkedArray)
                            or frames.get_total_buffer_size() > MAX_ARRAY_BYTES):
        return None
    return frames


def read_heads(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The heads of the frames that start at ``starts`` in ``data`` (bytes, each frame at
    least HEAD_SIZE long), as a structured array of :data:`HEAD_DTYPE`."""
    if len(starts) == 0:
        return np.zeros(0, HEAD_DTYPE)
    # row i of the windows is the HEAD_SIZE bytes from byte i on (a view, no copy): picking
    # rows copies each head once, where an index per byte cost a 160-byte index per head
    windows = np.lib.stride_tricks.sliding_window_view(data, HEAD_SIZE)
    heads: np.ndarray = windows[starts].view(HEAD_DTYPE).reshape(len(starts))
    return heads


def split(
    frames: pa.BinaryArray, order: np.ndarray | None = None
) -> tuple[np.ndarray, pa.BinaryArray, pa.BinaryArray]:
    """(event times as int64, header bytes, body bytes) of whole frames, in their order,
    or of the frames at the indexes ``order``, in that order.

    Raises ValueError if a value cannot be a frame (NULL, or shorter than its head), chosen
    by ``order`` or not.
    """
    n = len(frames)
    if n == 0 or (order is not None and len(order) == 0):
        return np.zeros(0, np.int64), pa.array([], pa.binary()), pa.array([], pa.binary())
    _, offsets_buf, data_buf = frames.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, frames.offset * 4)
    starts = offsets[:-1]
    if frames.null_count or int(np.min(offsets[1:] - starts)) < HEAD_SIZE:
        raise ValueError("a value shorter than a frame head reached the decoder")
    heads = read_heads(np.frombuffer(data_buf, np.uint8), starts)
    # element 3i is frame i's head, 3i+1 its header, 3i+2 its body
    cuts = np.empty(3 * n + 1, np.int32)
    cuts[0:-1:3] = starts
    cuts[1::3] = starts + HEAD_SIZE
    cuts[2::3] = cuts[1::3] + heads["header"].astype(np.int32)
    cuts[-1] = offsets[-1]
    parts = pa.Array.from_buffers(pa.binary(), 3 * n, [None, pa.py_buffer(cuts), data_buf])
    # picking the headers and bodies copies them once, in the order asked for
    picked = np.arange(n) if order is None else np.asarray(order, np.int64)
    headers = parts.take(pa.array(3 * picked + 1))
    bodies = parts.take(pa.array(3 * picked + 2))
    stamps = heads["timestamp"] if order is None else heads["timestamp"][picked]
    return stamps.astype(np.int64), headers, bodies
