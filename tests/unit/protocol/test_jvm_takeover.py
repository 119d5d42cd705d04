"""The JVM exporter's names and the takeover rule (pure)."""

from __future__ import annotations

from hypothesis import given, strategies as st

from garmexport.protocol.jvm_names import JvmFile, day_of_dir
from garmexport.protocol.jvm_resume import JvmFound, newest_per_day, takeover_marker
from garmexport.protocol.naming import FileName, IntentName
from garmexport.protocol.resume import merge_state


def test_jvm_names_of_every_era_parse_and_foreign_names_do_not() -> None:
    assert JvmFile.parse("3.index=12") == JvmFile(3, "", 12, None, "3.index=12")
    assert JvmFile.parse("0.cluster=pa4.index=2") == JvmFile(0, "pa4", 2, None, "0.cluster=pa4.index=2")
    assert JvmFile.parse("7.1234") == JvmFile(7, "", None, 1234, "7.1234")
    assert JvmFile.parse("7.cluster=x.1234") == JvmFile(7, "x", None, 1234, "7.cluster=x.1234")
    assert JvmFile.parse("1.index=3.998") == JvmFile(1, "", 3, 998, "1.index=3.998")
    ours = FileName("local", "garmadon", 3, 12).format()
    for foreign in (".3.done", "3", "3.index=", "_SUCCESS", ".3.index=1.crc", "3.index=1.crc",
                    ours, "3.index=1 ", "x.index=1", "3.cluster=.index=1", "٣.index=1"):
        assert JvmFile.parse(foreign) is None, foreign
    assert day_of_dir("day=2019-10-01") == "2019-10-01" == day_of_dir("2019-10-01")
    assert day_of_dir("day=2019-10") is None and day_of_dir("_offsets") is None


@given(st.integers(0, 10**5), st.sampled_from(["", "pa4", "a_b-1"]),
       st.one_of(st.none(), st.integers(0, 10**6)), st.one_of(st.none(), st.integers(0, 10**12)))
def test_a_jvm_name_parses_back_to_what_it_says(p: int, cluster: str, index: int | None,
                                                offset: int | None) -> None:
    name = (f"{p}{f'.cluster={cluster}' if cluster else ''}"
            f"{'' if index is None else f'.index={index}'}{'' if offset is None else f'.{offset}'}")
    parsed = JvmFile.parse(name)
    if index is None and offset is None:
        assert parsed is None
    else:
        assert parsed == JvmFile(p, cluster, index, offset, name)


def test_the_newest_file_of_each_day_is_the_highest_index_of_our_partition_and_tag() -> None:
    days = [
        ("2024-01-01", "day=2024-01-01", ["0.index=1", "0.index=10", "0.index=9", "1.index=50",
                                          "0.cluster=old.index=99", ".0.index=11.crc"]),
        ("2024-01-01", "2024-01-01", [".0.done", "0.7"]),        # same day, older era
        ("2019-03-01", "2019-03-01", ["0.100", "0.2000", "0.300"]),  # offsets, not text order
        ("2024-01-02", "day=2024-01-02", ["1.index=1"]),          # not our partition
    ]
    got = newest_per_day(days, 0, "")
    assert {d: (dirname, f.name) for d, (dirname, f) in got.items()} == {
        "2024-01-01": ("day=2024-01-01", "0.index=10"), "2019-03-01": ("2019-03-01", "0.2000")}
    tagged = newest_per_day(days, 0, "old")
    assert {d: f.name for d, (_, f) in tagged.items()} == {"2024-01-01": "0.cluster=old.index=99"}


def test_takeover_resumes_each_type_after_its_jvm_offset_and_seeks_to_the_lowest() -> None:
    found = {"fs": JvmFound(900, "2024-01-02", "fs/day=2024-01-02/0.index=3"),
             "gc": JvmFound(400, "2024-01-01", "gc/day=2024-01-01/0.index=1")}
    state = merge_state(0, [takeover_marker(0, found)])
    assert state.seek() == 401
    assert 900 <= state.for_origin("fs").skip_bound("d", "2023-12-01")       # any day: max written
    assert not 901 <= state.for_origin("fs").skip_bound("d", "2024-01-02")
    assert 400 <= state.for_origin("gc").skip_bound("d", "2024-01-02") and not 401 <= state.for_origin("gc").skip_bound("d", "2024-01-02")
    # a type the JVM never wrote for this partition starts where the others allow
    assert state.low_of("spark_task") == 400
    assert takeover_marker(0, {}) is None


def test_garmexport_files_published_before_its_first_marker_count_beside_the_jvm_offsets() -> None:
    found = {"fs": JvmFound(900, "2024-01-02", "fs/day=2024-01-02/0.index=3"),
             "gc": JvmFound(400, "2024-01-01", "gc/day=2024-01-01/0.index=1")}
    intent = IntentName("gc", "d", "2024-01-02", 401)
    state = merge_state(0, [takeover_marker(0, found)], [(intent, 950)])
    assert state.seek() == 401  # W of gc stays 400: the intent's file is one chain's
    assert 950 <= state.for_origin("gc").skip_bound("d", "2024-01-02")
    assert not 950 <= state.for_origin("gc").skip_bound("d", "2024-01-01")


def test_a_takeover_record_round_trips_and_names_what_the_jvm_wrote_since() -> None:
    from garmexport.protocol.jvm_resume import Takeover, still_writing, watch_since

    assert watch_since(["2024-01-01", "2024-03-01", "2019-01-01"]) == "2024-02-28"
    assert watch_since([]) is None
    t = Takeover(3, "2024-02-28", {"fs": JvmFound(9, "2024-03-01", "fs/day=2024-03-01/3.index=2")},
                 {"fs": {"2024-03-01": ("3.index=2", 1000)}, "gc": {}})
    back = Takeover.from_json(t.to_json())
    assert back.found == t.found and back.recent["fs"] == t.recent["fs"] and back.since == t.since
    assert still_writing(back, {"fs": {"2024-03-01": ("3.index=2", 1000)}}) == []
    assert still_writing(back, {}) == []  # compacted away or deleted: not writing
    assert still_writing(back, {"fs": {"2024-03-01": ("3.index=2", 1200)}}) == [
        "fs/day=2024-03-01/3.index=2 (size 1000 -> 1200)"]
    assert still_writing(back, {"fs": {"2024-03-01": ("3.index=3", 10)},
                                "gc": {"2024-03-02": ("3.index=1", 10)}}) == [
        "fs/day=2024-03-01/3.index=3 (new file)", "gc/day=2024-03-02/3.index=1 (new file)"]
