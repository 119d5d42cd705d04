"""Arrow rows: schema per type, native decoder == reference decoder, defaults NULL."""

from __future__ import annotations

import math
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.wire import columns, columns_reference
from garmexport.wire.columns import decode_batch
from garmexport.wire.schema import schema_for
from garmexport.wire.events import EXPORTED, HEADER, REGISTRY
from garmexport.wire.frames import Reason, encode
from tests import strategies as gs
from tests.hypothesis_profiles import examples

TRAILER = ["timestamp", "kafka_partition", "kafka_offset"]
JVM = REGISTRY[1001]
FS = REGISTRY[1]
per_type = pytest.mark.parametrize("event_type", EXPORTED, ids=lambda t: t.output)


def rows(table: pa.Table) -> list[dict]:
    """Rows with floats made comparable: NaN == NaN, and -0.0 kept apart from 0.0."""

    def norm(v):
        return ("float", struct.pack(">d", v)) if isinstance(v, float) else v

    return [{k: norm(v) for k, v in row.items()} for row in table.to_pylist()]


def assert_same(native, reference):
    (t1, f1), (t2, f2) = native, reference
    assert t1.schema == t2.schema
    assert rows(t1) == rows(t2)
    assert [(i, f.reason) for i, f in f1] == [(i, f.reason) for i, f in f2]


@per_type
def test_schema_is_header_fields_then_body_fields_then_the_trailer(event_type):
    names = schema_for(event_type).names
    header = [f.name for f in HEADER.DESCRIPTOR.fields]
    body = (
        list(event_type.flatten.properties)
        if event_type.flatten
        else [f.name for f in event_type.message.DESCRIPTOR.fields]
    )
    assert names == header + body + TRAILER
    assert len(set(names)) == len(names)
    assert all(f.nullable for f in schema_for(event_type))


def test_column_types_follow_the_protobuf_types():
    fs, gc = schema_for(FS), schema_for(REGISTRY[1000])
    assert fs.field("tags").type == pa.list_(pa.field("item", pa.string(), nullable=False))
    assert fs.field("java_feature").type == pa.int32()
    assert fs.field("method_duration_millis").type == pa.int64()  # uint64 kept as int64 bits
    assert fs.field("status").type == pa.string()  # enum symbol
    assert gc.field("gc_pause_ratio_1_min").type == pa.float32()
    assert schema_for(REGISTRY[5003]).field("num_records_in_per_second").type == pa.float64()
    assert schema_for(REGISTRY[4001]).field("is_finished").type == pa.bool_()
    assert [schema_for(JVM).field(n).type for n in ("init", "committed", "used", "max")] == [
        pa.int64()
    ] * 4
    assert [(f.name, f.type) for f in fs][-3:] == [
        ("timestamp", pa.int64()), ("kafka_partition", pa.int32()), ("kafka_offset", pa.int64())
    ]  # fmt: skip


@per_type
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_native_and_reference_decoders_agree_on_valid_frames(event_type, data):
    events = data.draw(st.lists(gs.frames(event_type), max_size=8))
    values = [encode(*event) for event in events]
    offsets = list(range(100, 100 + len(values)))
    native = decode_batch(event_type, values, 7, offsets)
    assert_same(native, columns_reference.decode_batch(event_type, values, 7, offsets))
    assert native[1] == [] and native[0].num_rows == len(values)


@per_type
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_native_and_reference_decoders_agree_on_damaged_frames(event_type, data):
    values = data.draw(st.lists(gs.mutated_frames(event_type), max_size=40))
    offsets = list(range(len(values)))
    assert_same(
        decode_batch(event_type, values, 0, offsets),
        columns_reference.decode_batch(event_type, values, 0, offsets),
    )


@per_type
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_native_and_reference_decoders_agree_when_records_share_a_few_headers(event_type, data):
    """A batch repeats the headers of a few JVMs (the native decoder parses each once);
    some of those headers may be damaged, so every record carrying one is bad."""
    pool = data.draw(st.lists(
        st.one_of(gs.headers().map(lambda h: h.SerializeToString()),
                  gs.bad_payloads(HEADER)), min_size=1, max_size=4))
    picks = data.draw(st.lists(
        st.tuples(st.integers(0, len(pool) - 1), gs.stamped_bodies(event_type)), min_size=2,
        max_size=60))
    values = []
    for k, (stamp, body) in picks:
        body_bytes = body.SerializeToString()
        values.append(struct.pack(">iqii", event_type.marker, stamp, len(pool[k]), len(body_bytes))
                      + pool[k] + body_bytes)
    offsets = list(range(len(values)))
    native = decode_batch(event_type, values, 0, offsets)
    assert_same(native, columns_reference.decode_batch(event_type, values, 0, offsets))


def test_a_damaged_header_shared_by_many_records_makes_each_of_them_bad():
    good = HEADER(application_id="app_1", hostname="h1").SerializeToString()
    bad = b"\x0a\x05ab"
    body = FS.message(uri="hdfs://x").SerializeToString()
    values = [struct.pack(">iqii", FS.marker, 1000 + i, len(h), len(body)) + h + body
              for i, h in enumerate([good, bad, good, bad, good, good])]
    table, failures = decode_batch(FS, values, 0, list(range(6)))
    assert [(i, f.reason) for i, f in failures] == [(1, Reason.BAD_HEADER), (3, Reason.BAD_HEADER)]
    assert table.column("kafka_offset").to_pylist() == [0, 2, 4, 5]
    assert table.column("timestamp").to_pylist() == [1000, 1002, 1004, 1005]
    assert table.column("hostname").to_pylist() == ["h1"] * 4


def expected_value(field, value):
    """What docs/wire-format.md (section 3) says one field becomes in a row."""
    if field.is_repeated:
        return list(value) or None
    if field.type == field.TYPE_ENUM:
        if value == 0:
            return None
        known = field.enum_type.values_by_number.get(value)
        return known.name if known else str(value)
    if field.type == field.TYPE_UINT64:
        return (value - 2**64 if value >= 2**63 else value) or None
    if isinstance(value, float):
        return None if value == 0.0 else value
    return value if value else None


@per_type
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_encoded_event_round_trips_to_a_row_with_defaults_as_null(event_type, data):
    marker, stamp, header, body = data.draw(gs.frames(event_type))
    table, failures = decode_batch(event_type, [encode(marker, stamp, header, body)], 3, [42])
    assert failures == []
    (row,) = rows(table)
    expected = {
        f.name: expected_value(f, getattr(header, f.name)) for f in HEADER.DESCRIPTOR.fields
    }
    if event_type.flatten is None:
        for f in event_type.message.DESCRIPTOR.fields:
            expected[f.name] = expected_value(f, getattr(body, f.name))
    expected.update(timestamp=stamp, kafka_partition=3, kafka_offset=42)
    for name, value in expected.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(table.column(name)[0].as_py()), name
        else:
            assert row[name] == rows(pa.table({name: [value]}))[0][name], name


def test_a_batch_reports_bad_records_and_keeps_the_good_ones_in_order():
    good = [encode(1, 10 + i, HEADER(hostname=f"h{i}"), FS.message(uri="u")) for i in range(5)]
    bad_header = encode(1, 1, b"\x0a\x02\xc0\x80", b"")  # invalid UTF-8 in application_id
    bad_body = encode(1, 1, b"", b"\x5b\x44")  # group closed by the wrong end-group
    bad_both = encode(1, 1, b"\xff", b"\xff")
    values = [good[0], bad_header, good[1], bad_body, good[2], bad_both, good[3], good[4]]
    table, failures = decode_batch(FS, values, 1, list(range(50, 58)))
    assert [(i, f.reason) for i, f in failures] == [
        (1, Reason.BAD_HEADER), (3, Reason.BAD_BODY), (5, Reason.BAD_HEADER)
    ]  # fmt: skip
    assert table.column("hostname").to_pylist() == ["h0", "h1", "h2", "h3", "h4"]
    assert table.column("kafka_offset").to_pylist() == [50, 52, 54, 56, 57]
    assert table.column("timestamp").to_pylist() == [10, 11, 12, 13, 14]


@pytest.mark.parametrize("payload", gs.KNOWN_BAD_PAYLOADS)
@pytest.mark.parametrize("size", [1, 100])  # alone, and found by bisection in a batch
def test_payloads_upb_rejects_are_bad_for_both_decoders(payload, size):
    good = encode(1, 1, HEADER(id="x"), b"")
    values = [good] * (size - 1) + [encode(1, 1, HEADER(id="x"), payload)]
    native = decode_batch(FS, values, 0, list(range(size)))
    assert [(i, f.reason) for i, f in native[1]] == [(size - 1, Reason.BAD_BODY)]
    assert native[0].num_rows == size - 1
    assert_same(native, columns_reference.decode_batch(FS, values, 0, list(range(size))))


def ptars_accepts(message, payload: bytes) -> bool:
    """Whether ptars alone converts ``payload`` (no upb check before it)."""
    try:
        columns._handler(message.DESCRIPTOR).array_to_record_batch(pa.array([payload], pa.binary()))
    except BaseException:  # noqa: BLE001 - ValueError, or a Rust panic
        return False
    return True


# Found by converting random bytes with both (about one in ten payloads ptars accepts is one
# upb rejects): wire types 3 and 4 (groups) and field numbers past 2**29, which ptars skips.
PTARS_ACCEPTS_UPB_REJECTS = [
    (FS, b"\x5b\x44"),  # group closed by another field's end-group
    (FS, b"\xf8\xff\xff\xff\x1f\x01"),  # field number >= 2**29
    (REGISTRY[1001], b"CT"),  # end-group of field 8 without its start
    (FS, b"\xcbR4"),  # a group that never ends
]


@pytest.mark.parametrize(("event_type", "payload"), PTARS_ACCEPTS_UPB_REJECTS)
def test_ptars_alone_accepts_bodies_upb_rejects_so_upb_checks_every_batch(event_type, payload):
    """Why the decoder asks upb about every batch, not only when ptars refuses one (as the
    benchmark's native floor does): ptars converts these bodies to rows, upb rejects them,
    and the exporter quarantines them, as the reference decoder does."""
    assert ptars_accepts(event_type.message, payload)
    assert not gs._parses(event_type.message, payload)
    good = encode(event_type.marker, 1, HEADER(id="x"), b"")
    values = [good, encode(event_type.marker, 2, HEADER(id="x"), payload), good]
    native = decode_batch(event_type, values, 0, [0, 1, 2])
    assert [(i, f.reason) for i, f in native[1]] == [(1, Reason.BAD_BODY)]
    assert_same(native, columns_reference.decode_batch(event_type, values, 0, [0, 1, 2]))


@per_type
@settings(max_examples=examples(50), deadline=None)
@given(data=st.data())
def test_any_bytes_as_a_body_are_judged_by_upb_whatever_ptars_makes_of_them(event_type, data):
    """Arbitrary bodies, some of which ptars accepts and upb rejects (above): a record is
    quarantined exactly when upb rejects its body, and the rows match the reference's."""
    bodies = data.draw(st.lists(st.one_of(st.binary(min_size=1, max_size=12),
                                          gs.bad_payloads(event_type.message)), max_size=12))
    values = [encode(event_type.marker, i, HEADER(id="x"), b) for i, b in enumerate(bodies)]
    offsets = list(range(len(values)))
    native = decode_batch(event_type, values, 0, offsets)
    assert [i for i, _ in native[1]] == [
        i for i, b in enumerate(bodies) if not gs._parses(event_type.message, b)]
    assert_same(native, columns_reference.decode_batch(event_type, values, 0, offsets))


@per_type
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_the_floors_way_decodes_valid_and_refused_batches_as_the_exporter_does(event_type, data):
    """check_first=False (the benchmark's floor): upb only when ptars refuses the batch.
    Valid frames, and damaged ones that ptars refuses, come out as the exporter's do."""
    values = [encode(*e) for e in data.draw(st.lists(gs.frames(event_type), max_size=8))]
    refused = data.draw(st.booleans())
    if refused:
        values.insert(data.draw(st.integers(0, len(values))),
                      encode(event_type.marker, 1, HEADER(), b"\xff"))  # varint cut short
    offsets = list(range(len(values)))
    order = np.arange(len(values))[::-1].copy() if data.draw(st.booleans()) else None
    floor = decode_batch(event_type, values, 0, offsets, order, check_first=False)
    assert_same(floor, decode_batch(event_type, values, 0, offsets, order))
    assert len(floor[1]) == int(refused)


@pytest.mark.parametrize(("event_type", "payload"), PTARS_ACCEPTS_UPB_REJECTS)
def test_the_floors_way_is_not_exact_it_keeps_bodies_upb_rejects(event_type, payload):
    values = [encode(event_type.marker, 2, HEADER(id="x"), payload)]
    table, failures = decode_batch(event_type, values, 0, [0], check_first=False)
    assert (table.num_rows, failures) == (1, [])


def test_an_empty_batch_gives_an_empty_table_with_the_schema():
    for decoder in (decode_batch, columns_reference.decode_batch):
        table, failures = decoder(JVM, [], 0, [])
        assert table.num_rows == 0 and table.schema == schema_for(JVM) and failures == []


def jvm(*sections):
    message = JVM.message
    return message(
        section=[
            message.Section(
                name=name, property=[message.Property(name=k, value=v) for k, v in props]
            )
            for name, props in sections
        ]
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (jvm(), [None] * 4),
        (jvm(("heap", [("init", "1"), ("committed", "2"), ("used", "3"), ("max", "4")])),
         [1, 2, 3, 4]),
        (jvm(("nonheap", [("used", "3")])), [None] * 4),
        (jvm(("heap", [("used", "0"), ("max", "-1")])), [None, None, 0, -1]),
        (jvm(("heap", [("used", "3"), ("used", "x")])), [None, None, None, None]),
        (jvm(("heap", [("used", "3")]), ("heap", [("used", "5")])), [None, None, 5, None]),
        (jvm(("heap", [("init", "9223372036854775807"), ("max", "9223372036854775808")])),
         [2**63 - 1, None, None, None]),
        (jvm(("heap", [("init", " 1"), ("committed", "+2"), ("used", "3\n"), ("max", "")])),
         [None] * 4),
    ],
)  # fmt: skip
def test_jvmstats_keeps_only_the_heap_section_as_four_int64_columns(body, expected):
    value = encode(1001, 5, HEADER(), body)
    for decoder in (decode_batch, columns_reference.decode_batch):
        table, _ = decoder(JVM, [value], 0, [0])
        heap = [table.column(n)[0].as_py() for n in ("init", "committed", "used", "max")]
        assert heap == expected, decoder.__module__


def test_enum_zero_is_null_and_an_undeclared_number_is_its_decimal_string():
    values = [encode(1, 1, HEADER(), FS.message(status=s)) for s in (0, 1, 2, 9, -1)]
    table, _ = decode_batch(FS, values, 0, range(5))
    assert table.column("status").to_pylist() == [None, "FAILURE", "SUCCESS", "9", "-1"]


def test_uint64_keeps_its_bits_in_int64():
    values = [
        encode(1, 1, HEADER(), FS.message(method_duration_millis=v)) for v in (5, 2**63, 2**64 - 1)
    ]
    table, _ = decode_batch(FS, values, 0, range(3))
    assert table.column("method_duration_millis").to_pylist() == [5, -(2**63), -1]


def test_empty_lists_are_null_but_empty_strings_inside_a_list_are_kept():
    values = [encode(1, 1, HEADER(tags=t), b"") for t in ([], [""], ["a", ""])]
    table, _ = decode_batch(FS, values, 0, range(3))
    assert table.column("tags").to_pylist() == [None, [""], ["a", ""]]


def test_a_failing_native_converter_falls_back_to_the_reference_rows(monkeypatch):
    values = [encode(1, 1, HEADER(hostname="h"), FS.message(uri="u")), encode(1, 1, b"\xff", b"")]
    expected = columns_reference.decode_batch(FS, values, 0, [0, 1])

    class Broken:
        def array_to_record_batch(self, payloads):
            raise ValueError("converter bug")

    monkeypatch.setattr(columns, "_handler", lambda descriptor: Broken())
    assert_same(decode_batch(FS, values, 0, [0, 1]), expected)


def test_frames_that_do_not_fit_one_array_are_decoded_in_halves(monkeypatch):
    """Past frame_arrays.MAX_ARRAY_BYTES (1 GiB: ptars reads 32-bit offsets only), a batch
    is decoded in halves: the same rows, and failures at their index in the whole batch."""
    values = [encode(1, 10 + i, HEADER(hostname=f"h{i % 2}"), FS.message(uri=f"u{i}"))
              for i in range(7)]
    values[5] = encode(1, 1, b"", b"\x5b\x44")  # a bad body, in the second half
    whole = decode_batch(FS, values, 0, list(range(100, 107)))
    monkeypatch.setattr(columns.frame_arrays, "MAX_ARRAY_BYTES", 2 * max(map(len, values)))
    halves = decode_batch(FS, values, 0, list(range(100, 107)))
    assert_same(halves, whole)
    assert [i for i, _ in halves[1]] == [5]


def test_payloads_of_16_kib_and_more_are_checked_like_small_ones():
    big = FS.message(uri="x" * 20_000).SerializeToString()
    values = [encode(1, 1, HEADER(id="x"), big), encode(1, 2, HEADER(id="x"), big[:-1])]
    native = decode_batch(FS, values, 0, [0, 1])
    assert [(i, f.reason) for i, f in native[1]] == [(1, Reason.BAD_BODY)]
    assert native[0].column("uri").to_pylist() == ["x" * 20_000]
    assert_same(native, columns_reference.decode_batch(FS, values, 0, [0, 1]))


def shared_header_frames(event_type, data, bad_bodies: bool = True) -> list[bytes]:
    """Frames sharing a few headers, some of them damaged, with damaged bodies among them."""
    pool = data.draw(st.lists(
        st.one_of(gs.headers().map(lambda h: h.SerializeToString()),
                  gs.bad_payloads(HEADER)), min_size=1, max_size=4))
    picks = data.draw(st.lists(
        st.tuples(st.integers(0, len(pool) - 1), gs.stamped_bodies(event_type),
                  st.one_of(st.none(), gs.bad_payloads(event_type.message)) if bad_bodies
                  else st.none()),
        min_size=2, max_size=60))
    values = []
    for k, (stamp, body), bad_body in picks:
        body_bytes = body.SerializeToString() if bad_body is None else bad_body
        values.append(struct.pack(">iqii", event_type.marker, stamp, len(pool[k]), len(body_bytes))
                      + pool[k] + body_bytes)
    return values


@per_type
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_decoding_in_an_order_is_decoding_the_values_in_that_order(event_type, data):
    """The writer decodes a batch in (day, offset) order by passing ``order``; the result
    is the reference decoder's on the values picked in that order."""
    values = data.draw(st.one_of(st.lists(gs.mutated_frames(event_type), max_size=40),
                                 st.builds(shared_header_frames, st.just(event_type), st.data())))
    offsets = [1000 + 3 * i for i in range(len(values))]
    order = data.draw(st.permutations(range(len(values))).flatmap(
        lambda p: st.integers(0, len(p)).map(lambda k: p[:k])))
    picked = [values[i] for i in order]
    native = decode_batch(event_type, values, 0, offsets, order=np.array(order, np.int64))
    reference = columns_reference.decode_batch(event_type, picked, 0, [offsets[i] for i in order])
    assert_same(native, reference)
    assert_same(native, decode_batch(event_type, picked, 0, [offsets[i] for i in order]))


@per_type
@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_records_sharing_headers_with_bad_headers_and_bad_bodies_match_the_reference(
        event_type, data):
    """Records dropped for a bad header or body leave the distinct headers behind: the
    kept records' headers are renumbered, not worked out again."""
    values = shared_header_frames(event_type, data)
    offsets = list(range(len(values)))
    assert_same(decode_batch(event_type, values, 0, offsets),
                columns_reference.decode_batch(event_type, values, 0, offsets))


def test_a_header_only_a_bad_body_had_does_not_shift_the_others():
    shared = [HEADER(hostname=f"h{k}").SerializeToString() for k in range(3)]
    lonely = HEADER(hostname="lonely").SerializeToString()
    bad_header, bad_body = b"\x0a\x05ab", b"\x5b\x44"
    good_body = FS.message(uri="u").SerializeToString()
    rows = ([(shared[i % 3], good_body) for i in range(10)] + [(lonely, bad_body)]
            + [(bad_header, good_body)] * 2 + [(shared[i % 3], good_body) for i in range(10)])
    values = [struct.pack(">iqii", FS.marker, i, len(h), len(b)) + h + b
              for i, (h, b) in enumerate(rows)]
    order = np.array(list(range(len(values)))[::-1], np.int64)
    table, failures = decode_batch(FS, values, 0, list(range(len(values))), order=order)
    assert [(i, f.reason) for i, f in failures] == [
        (10, Reason.BAD_HEADER), (11, Reason.BAD_HEADER), (12, Reason.BAD_BODY)]
    assert table.column("hostname").to_pylist() == [f"h{i % 3}" for i in range(10)][::-1] * 2
    assert table.column("kafka_offset").to_pylist() == [*range(22, 12, -1), *range(9, -1, -1)]


def test_an_empty_order_decodes_nothing():
    values = [encode(1, 1, HEADER(hostname="h"), FS.message(uri="u"))]
    table, failures = decode_batch(FS, values, 0, [5], order=np.zeros(0, np.int64))
    assert table.num_rows == 0 and table.schema == schema_for(FS) and failures == []


def test_an_order_over_frames_too_large_for_one_array_picks_the_values(monkeypatch):
    values = [encode(1, 10 + i, HEADER(hostname=f"h{i % 2}"), FS.message(uri=f"u{i}"))
              for i in range(7)]
    values[5] = encode(1, 1, b"", b"\x5b\x44")
    order = np.array([6, 5, 0, 2, 1], np.int64)
    whole = decode_batch(FS, values, 0, list(range(100, 107)), order=order)
    monkeypatch.setattr(columns.frame_arrays, "MAX_ARRAY_BYTES", 2 * max(map(len, values)))
    halves = decode_batch(FS, values, 0, list(range(100, 107)), order=order)
    assert_same(halves, whole)
    assert [i for i, _ in halves[1]] == [1]
    assert halves[0].column("kafka_offset").to_pylist() == [106, 100, 102, 101]


@pytest.mark.parametrize("distinct, deduplicated", [(1, True), (6, True), (7, False), (9, False)])
def test_headers_go_through_their_distinct_values_up_to_two_in_three(distinct, deduplicated):
    headers = [HEADER(hostname=f"h{i % distinct}").SerializeToString() for i in range(9)]
    chosen = columns._Distinct.of(pa.array(headers, pa.binary()))
    assert (chosen.index is not None) == deduplicated
    assert len(chosen.values) == (distinct if deduplicated else 9)
    values = [encode(1, i, HEADER.FromString(h), FS.message(uri=f"u{i}"))
              for i, h in enumerate(headers)]
    assert_same(decode_batch(FS, values, 0, list(range(9))),
                columns_reference.decode_batch(FS, values, 0, list(range(9))))
