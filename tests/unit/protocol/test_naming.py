"""The file name is the commit record: names round-trip, foreign names are not ours, and
name order is offset order (DESIGN.md 4.3)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.protocol.naming import (
    KINDS,
    MS_PER_DAY,
    FileName,
    IntentName,
    MarkerName,
    day_name,
    parse_day_dir,
    quarantine_day,
)
from tests.hypothesis_profiles import examples

labels = st.from_regex(r"\A[A-Za-z0-9._-]{1,12}\Z")
partitions = st.integers(0, 99_999)
offsets = st.integers(0, 10**20 - 1)
days = st.integers(0, 2_932_896).map(day_name)  # 1970-01-01 .. 9999-12-31
file_names = st.builds(FileName, labels, labels, partitions, offsets, st.none() | labels)
marker_names = st.builds(MarkerName, labels, st.integers(0, 10**12 - 1))
intent_names = st.builds(IntentName, labels, st.sampled_from(KINDS), days, offsets)
PARSERS = (FileName.parse, MarkerName.parse, IntentName.parse)


@settings(max_examples=examples(300))
@given(st.one_of(file_names, marker_names, intent_names))
def test_parse_of_format_is_the_name(name: FileName | MarkerName | IntentName) -> None:
    assert type(name).parse(name.format()) == name


@settings(max_examples=examples(300))
@given(st.one_of(file_names, marker_names, intent_names))
def test_a_name_is_read_by_its_own_parser_only(name: FileName | MarkerName | IntentName
                                               ) -> None:
    text = name.format()
    assert [p(text) is not None for p in PARSERS] == [isinstance(name, t) for t in
                                                       (FileName, MarkerName, IntentName)]


@settings(max_examples=examples(500))
@given(st.text(max_size=80) | st.from_regex(r"[a-z0-9+._=-]{0,60}(\.parquet|\.json)?"))
def test_a_foreign_name_is_not_ours_or_is_exactly_a_name_of_ours(text: str) -> None:
    """Parsing is total: never an exception; what parses formats back to the same text."""
    for parse in PARSERS:
        name = parse(text)
        assert name is None or name.format() == text, (parse, text)
    day = parse_day_dir(text)
    assert day is None or text == f"day={day}"


def test_bookkeeping_and_hadoop_names_are_not_ours() -> None:
    ours = FileName("local", "garmadon", 3, 42).format()
    for foreign in ("_SUCCESS", f".{ours}.crc", f"{ours}.crc", f"{ours}.tmp",
                    "part-00000-1c2d.snappy.parquet", "local+garmadon+3+42.parquet",
                    "local+garmadon+00003+00000000000000000042+.parquet", ""):
        assert all(p(foreign) is None for p in PARSERS), foreign
    assert parse_day_dir("day=2026-13-01") is None and parse_day_dir("2026-11-01") is None


@settings(max_examples=examples(300))
@given(labels, labels, partitions, st.lists(offsets, min_size=2, max_size=20))
def test_name_order_is_offset_order(source: str, topic: str, partition: int,
                                    firsts: list[int]) -> None:
    names = [FileName(source, topic, partition, o).format() for o in firsts]
    assert [FileName.parse(n).first_offset for n in sorted(names)] == sorted(firsts)  # type: ignore[union-attr]


def test_names_that_only_look_like_ours_are_not_ours() -> None:
    """Examples found by the property above: a trailing newline, non-ASCII digits, and an
    ISO week date that ``date.fromisoformat`` accepts."""
    ours = FileName("a", "b", 3, 42).format()
    arabic = ours.replace("00003", "\u0660\u0660\u0660\u0660\u0663")
    for text in (ours + "\n", arabic, MarkerName("e1", 7).format() + "\n",
                 IntentName("fs", "d", "2026-11-01", 5).format() + "\n"):
        assert all(p(text) is None for p in PARSERS), repr(text)
    assert parse_day_dir("day=2026-W44-7") is None
    assert parse_day_dir("day=2026-11-01\n") is None


def test_a_quarantined_record_is_filed_on_its_kafka_day_and_day_0_without_a_timestamp() -> None:
    assert quarantine_day(MS_PER_DAY * 3 + 5) == 3 and quarantine_day(MS_PER_DAY - 1) == 0
    assert quarantine_day(-1) == 0  # Kafka's "no timestamp"
