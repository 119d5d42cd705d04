"""Frames to Arrow: the schema of each dataset and the native batch decoder.

The row layout is :mod:`garmexport.wire.schema`'s. Value rules, shared with
``columns_reference``:

* proto3 defaults are NULL, as the JVM exporter wrote them: ``""``, 0, 0.0 of either sign,
  false, an empty repeated field (proto3 cannot tell it from an absent one) and enum number 0
  (the wire never carries it, so "UNKNOWN" and "not set" are the same event). Elements inside
  a list are kept as they are, ``""`` included.
* enums are their symbol name; a number the enum does not declare is its decimal string.
* uint64 is stored as int64 with the same 64 bits (values >= 2**63 come out negative), as the
  JVM exporter's Parquet files did: Hive tables built on them read the column as bigint,
  whereas a Parquet UINT_64 column would read as decimal(20,0) in Spark.

Decoding is batch oriented (:func:`decode_batch`), with no Python step per record: the
frames are cut into header and body arrays over whole columns (``frame_arrays``), and the
protobuf parse runs in C twice. First upb, the judge of what is bad that the reference
decoder and ``frames.decode`` use too, checks the batch (``upb_check``). Then ptars turns
the good payloads into Arrow columns, which Arrow compute post-processes. ptars alone would not do: it accepts some
corrupt messages upb rejects (about one in ten of the random byte strings it accepts: groups,
field numbers past 2**29; ``test_ptars_alone_accepts_bodies_upb_rejects...``), and panics on
some. So upb checks every batch, not only those ptars refuses: the check is the price of
quarantining exactly what the reference decoder quarantines.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import ptars
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from garmexport.wire import columns_reference, frame_arrays, upb_check
from garmexport.wire.events import FILE_DESCRIPTORS, HEADER, EventType, SectionFlattening
from garmexport.wire.frames import DecodeFailure, Reason
from garmexport.wire.schema import STRING_LIST, arrow_type, schema_for

_F = FieldDescriptor


def decode_batch(
    event_type: EventType, values: Sequence[bytes], partition: int,
    offsets: Sequence[int] | np.ndarray, order: np.ndarray | None = None,
    *, check_first: bool = True,
) -> tuple[pa.Table, list[tuple[int, DecodeFailure]]]:
    """Decode frames of one type into a table of the good rows, in input order (or
    ``order``'s).

    ``values`` must be whole frames that ``frames.read_head`` accepted for this marker
    (lengths add up); ``offsets[i]`` is the Kafka offset of ``values[i]``. Records whose
    header or body does not parse come back as ``(index, failure)`` with BAD_HEADER (checked
    first) or BAD_BODY, never as exceptions.

    With ``order`` (indexes into ``values``), the records decoded are ``values[order[k]]``
    for k = 0, 1, ...: the table is in that order and a failure's index is its k. Headers
    and bodies are picked in that order from the frames as they come, which is cheaper
    than reordering ``values`` in Python. Every value must be a whole frame, picked or not.

    ``check_first=False`` is the benchmark's native floor (tests/bench/native_floor.py),
    not the exporter's way: ptars converts first, and upb is asked only when ptars refuses
    the batch (which is then decoded as with True). It is not exact: ptars accepts some
    bodies upb rejects (module docstring), and their records come out as rows.
    """
    given_offsets = offsets
    frames = frame_arrays.frames_array(values)
    if order is not None:
        if frames is None:  # too many bytes for one array: reorder the values themselves
            picked = order.tolist()
            return decode_batch(event_type, [values[i] for i in picked], partition,
                                [offsets[i] for i in picked], check_first=check_first)
        offsets = np.asarray(offsets, np.int64)[order]
    if frames is None:  # too many bytes for one array: two halves
        half = len(values) // 2
        first, first_failed = decode_batch(event_type, values[:half], partition, offsets[:half],
                                           check_first=check_first)
        rest, rest_failed = decode_batch(event_type, values[half:], partition, offsets[half:],
                                         check_first=check_first)
        return (pa.concat_tables([first, rest]),
                first_failed + [(half + i, failure) for i, failure in rest_failed])
    if (len(frames) if order is None else len(order)) == 0:
        return schema_for(event_type).empty_table(), []
    stamps, headers, bodies = frame_arrays.split(frames, order)
    kafka_offsets = np.asarray(offsets, np.int64)
    distinct = _Distinct.of(headers)
    by_index: dict[int, DecodeFailure] = {}
    bad_headers: list[tuple[int, DecodeFailure]] = []
    if check_first:
        by_index, bad_headers = _check(event_type, distinct, bodies)
    failures = sorted(by_index.items(), key=lambda item: item[0])
    if failures:
        keep = np.ones(len(bodies), bool)
        keep[[i for i, _ in failures]] = False
        stamps, kafka_offsets = stamps[keep], kafka_offsets[keep]
        bodies = bodies.filter(pa.array(keep))
        distinct = distinct.kept(keep, [i for i, _ in bad_headers])
    try:
        header_batch = _handler(HEADER.DESCRIPTOR).array_to_record_batch(distinct.values)
        body_batch = _handler(event_type.message.DESCRIPTOR).array_to_record_batch(bodies)
    except BaseException as exc:  # a Rust panic surfaces as a BaseException
        if not _is_converter_bug(exc):
            raise
        if not check_first:  # the floor's way: upb only once ptars refused
            return decode_batch(event_type, values, partition, given_offsets, order)
        ordered = values if order is None else [values[i] for i in order.tolist()]
        good = [value for i, value in enumerate(ordered) if i not in by_index]
        return _reference(event_type, good, partition, kafka_offsets.tolist()), failures
    arrays = [_nulled(header_batch.column(f.name), f) for f in HEADER.DESCRIPTOR.fields]
    if distinct.index is not None:
        arrays = pa.Table.from_arrays(arrays, names=_HEADER_NAMES).take(distinct.index).columns
    if event_type.flatten is not None:
        arrays += _flattened(body_batch.column("section"), event_type.flatten)
    else:
        body_fields = event_type.message.DESCRIPTOR.fields
        arrays += [_nulled(body_batch.column(f.name), f) for f in body_fields]
    arrays += [
        pa.array(stamps),
        pa.repeat(pa.scalar(partition, pa.int32()), len(stamps)),
        pa.array(kafka_offsets),
    ]
    return pa.Table.from_arrays(arrays, schema=schema_for(event_type)), failures


def find_failures(
    event_type: EventType, values: Sequence[bytes]
) -> list[tuple[int, DecodeFailure]]:
    """The failures :func:`decode_batch` returns for ``values`` (index, BAD_HEADER or
    BAD_BODY), found by the same check with no row converted: which records the writer
    quarantines rather than turns into rows. Same preconditions as :func:`decode_batch`."""
    frames = frame_arrays.frames_array(values)
    if frames is None:  # too many bytes for one array: two halves
        half = len(values) // 2
        rest = find_failures(event_type, values[half:])
        return find_failures(event_type, values[:half]) + [(half + i, f) for i, f in rest]
    if len(frames) == 0:
        return []
    _, headers, bodies = frame_arrays.split(frames)
    by_index, _ = _check(event_type, _Distinct.of(headers), bodies)
    return sorted(by_index.items(), key=lambda item: item[0])


def _check(
    event_type: EventType, distinct: _Distinct, bodies: pa.BinaryArray
) -> tuple[dict[int, DecodeFailure], list[tuple[int, DecodeFailure]]]:
    """upb's verdict on a batch: the failures by record index (a bad header hides the body),
    and the bad ones among the distinct headers (indexes into ``distinct.values``)."""
    by_index = dict(upb_check.find_bad(event_type.message, bodies, Reason.BAD_BODY))
    bad_headers = upb_check.find_bad(HEADER, distinct.values, Reason.BAD_HEADER)
    if bad_headers:  # a bad header hides the body
        by_index.update(distinct.expand(bad_headers))
    return by_index, bad_headers


_HEADER_NAMES = [f.name for f in HEADER.DESCRIPTOR.fields]


class _Distinct:
    """The distinct headers of a batch, and which one each record has.

    Headers describe the emitting JVM (application, container, host), so a batch of one
    type repeats a few of them thousands of times: parsing, checking and converting each
    distinct header once and then repeating its row (an Arrow ``take``) costs a fraction of
    doing it per record. When most headers differ, the repetition step is skipped.

    Measured on generator headers (185 bytes) in a batch of 8,192: with half of them
    distinct, going through the distinct ones costs 15 % less than parsing every header;
    the two break even at about three distinct in four. Above two distinct in three the
    headers are taken as they are, and the dictionary encoding (about 45 ns a record) is
    what the attempt cost.
    """

    __slots__ = ("values", "index")

    def __init__(self, values: pa.BinaryArray, index: pa.Array | None) -> None:
        self.values, self.index = values, index

    @classmethod
    def of(cls, headers: pa.BinaryArray) -> _Distinct:
        encoded = _DICTIONARY_ENCODE.call([headers])  # dictionary in order of first sight
        if 3 * len(encoded.dictionary) > 2 * len(headers):
            return cls(headers, None)
        return cls(encoded.dictionary, encoded.indices)

    def kept(self, keep: np.ndarray, bad: list[int]) -> _Distinct:
        """The headers of the records where ``keep`` is true; ``bad`` (indexes into
        :attr:`values`) are headers no kept record has, which are left out.

        The distinct values are not worked out again: the kept records' indexes are
        renumbered past the bad headers. Headers that only dropped records had stay, as
        rows nobody takes."""
        if self.index is None:
            return _Distinct(self.values.filter(pa.array(keep)), None)
        index = self.index.to_numpy()[keep]
        if not bad:
            return _Distinct(self.values, pa.array(index))
        good = np.ones(len(self.values), bool)
        good[bad] = False
        renumber = (np.cumsum(good) - 1).astype(index.dtype)
        return _Distinct(self.values.filter(pa.array(good)), pa.array(renumber[index]))

    def expand(self, found: list[tuple[int, DecodeFailure]]) -> list[tuple[int, DecodeFailure]]:
        """Failures of distinct headers as failures of every record that has them."""
        if self.index is None:
            return found
        by_distinct = dict(found)
        index = self.index.to_numpy()
        hit = np.flatnonzero(np.isin(index, list(by_distinct)))
        return [(int(i), by_distinct[int(index[i])]) for i in hit]


# Compute functions called directly: ``pc.equal`` and friends parse their arguments on every
# call, which is most of the cost on the small columns of a small batch (rare types).
_EQUAL, _NOT_EQUAL, _IF_ELSE, _LIST_LENGTH, _DICTIONARY_ENCODE = map(
    pc.get_function,
    ("equal", "not_equal", "if_else", "list_value_length", "dictionary_encode"))
_NO_ITEMS = pa.scalar(0, pa.int32())


@functools.cache
def _default_of(field: FieldDescriptor) -> pa.Scalar | None:
    """The proto3 default of a singular field as the scalar its column holds (None: repeated)."""
    if field.is_repeated:
        return None
    if field.type == _F.TYPE_ENUM:
        return pa.scalar(field.enum_type.values_by_number[0].name, pa.string())
    return pa.scalar(field.default_value, arrow_type(field))


def _nulled(column: pa.Array, field: FieldDescriptor) -> pa.Array:
    """Apply the value rules to one ptars column (non-null on input)."""
    default = _default_of(field)
    if default is None:
        empty = _EQUAL.call([_LIST_LENGTH.call([column]), _NO_ITEMS])
        return pa.ListArray.from_arrays(column.offsets, column.values, STRING_LIST, mask=empty)
    if field.type == _F.TYPE_UINT64:
        column = column.cast(pa.int64(), safe=False)  # keep the 64 bits, see module docstring
    # not_equal is false exactly where equal is true (inputs hold no NULL; NaN differs from
    # the default under both)
    valid = _NOT_EQUAL.call([column, default])
    if column.offset != 0:
        return _IF_ELSE.call([valid, column, pa.scalar(None, column.type)])
    # Zero copy: the mask's bitmap becomes the validity bitmap.
    return pa.Array.from_buffers(column.type, len(column), [valid.buffers()[1],
                                                            *column.buffers()[1:]])


def _flattened(sections: pa.ListArray, spec: SectionFlattening) -> list[pa.Array]:
    """One int64 column per ``spec.properties`` (rules: events.SectionFlattening)."""
    rows = len(sections)
    section_row = pc.list_parent_indices(sections)
    flat_sections = pc.list_flatten(sections)
    properties = flat_sections.field("property")
    property_section = pc.list_parent_indices(properties)
    flat_properties = pc.list_flatten(properties)
    wanted = pc.take(pc.equal(flat_sections.field("name"), spec.section), property_section)
    property_row = pc.take(section_row, property_section)
    names, texts = flat_properties.field("name"), flat_properties.field("value")
    columns = []
    for name in spec.properties:
        chosen = pc.and_(wanted, pc.equal(names, name))
        row, text = pc.filter(property_row, chosen), pc.filter(texts, chosen)
        if len(row) == 0:
            columns.append(pa.nulls(rows, pa.int64()))
            continue
        # Rows ascend; the last of each run of equal rows is the occurrence that wins.
        last = pa.concat_arrays([pc.not_equal(row[:-1], row[1:]), pa.array([True])])
        row, text = pc.filter(row, last), pc.filter(text, last)
        columns.append(pc.scatter(_parse_int64(text), row, max_index=rows - 1))  # others NULL
    return columns


_DEC = pa.decimal128(19, 0)
_INT64_MIN, _INT64_MAX = pa.scalar(-(2**63), _DEC), pa.scalar(2**63 - 1, _DEC)


def _parse_int64(texts: pa.Array) -> pa.Array:
    """``-?[0-9]{1,19}`` within int64 -> the number; anything else -> NULL."""
    well_formed = pc.match_substring_regex(texts, r"^-?[0-9]{1,19}$")
    numbers = pc.cast(pc.if_else(well_formed, texts, pa.scalar(None, pa.string())), _DEC)
    in_range = pc.and_(pc.greater_equal(numbers, _INT64_MIN), pc.less_equal(numbers, _INT64_MAX))
    return pc.cast(pc.if_else(in_range, numbers, pa.scalar(None, _DEC)), pa.int64())


@functools.cache
def _pool() -> ptars.HandlerPool:
    return ptars.HandlerPool(list(FILE_DESCRIPTORS), ptars.PtarsConfig(enum_repr="string"))


def _handler(descriptor: Descriptor) -> Any:  # ptars does not export its handler type
    return _pool().get_for_message(descriptor)


def _reference(
    event_type: EventType, values: list[bytes], partition: int, offsets: list[int]
) -> pa.Table:
    """Rows of upb-valid frames by the reference decoder: slower, same result."""
    return columns_reference.decode_batch(event_type, values, partition, offsets)[0]


def _is_converter_bug(exc: BaseException) -> bool:
    """ptars failing on payloads upb accepted: ValueError, or a Rust panic (BaseException)."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"
