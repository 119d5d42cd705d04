"""Compaction planning rules, without Spark: closed days, the watermark rule, grouping."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garmexport.compaction import complete, hive
from garmexport.compaction.closed import PartitionProgress, is_closed, last_closed_day
from garmexport.compaction.fs import Entry
from garmexport.compaction.markers import merge_partition
from garmexport.compaction.names import CompactedName
from garmexport.compaction.plan import InputFile, Range, next_generation, pack, plan_day
from garmexport.compaction.scan import day_generation
from garmexport.protocol.naming import MS_PER_DAY, FileName, day_number

D = day_number("2026-11-01")
HOUR = 3_600_000


def end_of(day: int) -> int:
    return (day + 1) * MS_PER_DAY


def raw(p: int, first: int, last: int, size: int = 100, source: str = "local",
        topic: str = "garmadon") -> InputFile:
    name = FileName(source, topic, p, first).format()
    return InputFile(name, source, topic, size, (Range(p, first, last, last - first + 1),))


def compacted(gen: int, k: int, size: int, ranges: tuple[Range, ...]) -> InputFile:
    name = CompactedName("local", "garmadon", gen, k).format()
    return InputFile(name, "local", "garmadon", size, ranges, compacted=True)


# ---- closed days ---------------------------------------------------------------------

def test_a_day_closes_only_when_the_slowest_partition_is_past_its_end_plus_lateness() -> None:
    lateness_s = 2 * 3600
    fast = PartitionProgress(low_event_ms=end_of(D) + 5 * HOUR, written_at_ms=None)
    slow = PartitionProgress(low_event_ms=end_of(D) + 1 * HOUR, written_at_ms=None)
    now = end_of(D) + 48 * HOUR  # the wall clock alone would close it long ago
    assert not is_closed(D, last_closed_day([fast, slow], now, lateness_s))
    assert is_closed(D - 1, last_closed_day([fast, slow], now, lateness_s))
    caught_up = PartitionProgress(low_event_ms=end_of(D) + 2 * HOUR, written_at_ms=None)
    assert is_closed(D, last_closed_day([fast, caught_up], now, lateness_s))


def test_late_events_keep_their_day_open_until_the_lateness_delay_has_passed() -> None:
    # Every partition has processed events 1 h into the next day: events of day D still
    # trickle in (late events), so with a 2 h lateness the day stays open.
    p = PartitionProgress(low_event_ms=end_of(D) + HOUR, written_at_ms=end_of(D) + 30 * HOUR)
    assert last_closed_day([p, p], end_of(D) + 30 * HOUR, 2 * 3600) == D - 1
    assert last_closed_day([p, p], end_of(D) + 30 * HOUR, 3600) == D  # exactly at the edge


def test_without_event_time_the_marker_write_time_is_used_and_now_caps_it() -> None:
    stuck = PartitionProgress(None, written_at_ms=end_of(D) - HOUR)  # stopped writing
    live = PartitionProgress(None, written_at_ms=end_of(D + 3))
    assert last_closed_day([stuck, live], end_of(D + 3), 0) == D - 1
    future = PartitionProgress(None, written_at_ms=end_of(D + 10))  # skewed clock
    assert last_closed_day([future], end_of(D), 0) == D


def test_no_markers_or_a_partition_without_time_closes_nothing() -> None:
    assert last_closed_day([], end_of(D + 9), 0) is None
    assert last_closed_day([PartitionProgress(None, None)], end_of(D + 9), 0) is None
    assert not is_closed(D, None)


def test_markers_merge_to_the_max_watermark_and_read_event_time_when_present() -> None:
    def marker(low: dict[str, int], at: int, **extra: int) -> bytes:
        return json.dumps({"partition": 3, "low": low, "days": {}, "processed": 1,
                           "written_at_ms": at, **extra}).encode()

    merged = merge_partition([marker({"fs": 10, "gc": 7}, 5), marker({"fs": 8}, 9),
                              b"not json"])
    assert merged is not None
    low, progress = merged
    assert low == {"fs": 10, "gc": 7}
    assert progress == PartitionProgress(None, 9)
    _, progress = merge_partition([marker({}, 5, low_event_ms=4), marker({}, 6)])  # type: ignore[misc]
    assert progress.progress_ms() == 4
    assert merge_partition([b"{}"]) is None


# ---- the safety rule ------------------------------------------------------------------

def test_only_files_at_or_below_the_watermark_are_folded() -> None:
    files = [raw(0, 0, 99), raw(0, 100, 199), raw(0, 200, 299), raw(1, 0, 49), raw(2, 0, 9)]
    w = {("local", "garmadon", 0): 199, ("local", "garmadon", 1): 49}  # partition 2: no W
    plan = plan_day("fs", "2026-11-01", files, w, 1, 10**9)
    folded = {f.name for f in plan.inputs}
    assert folded == {files[0].name, files[1].name, files[3].name}
    assert dict(plan.left) == {files[2].name: "above_watermark",
                               files[4].name: "above_watermark"}


def test_a_watermark_of_another_feed_does_not_count() -> None:
    f = raw(0, 0, 9, source="other")
    plan = plan_day("fs", "2026-11-01", [f], {("local", "garmadon", 0): 100}, 1, 10**9)
    assert plan.outputs == ()


def test_each_output_holds_one_feed_and_names_it() -> None:
    a, b = raw(0, 0, 9), raw(0, 0, 9, topic="other")
    w = {("local", "garmadon", 0): 9, ("local", "other", 0): 9}
    plan = plan_day("fs", "2026-11-01", [a, b], w, 4, 10**9)
    assert [(o.name.topic, o.name.generation, o.name.index) for o in plan.outputs] == [
        ("garmadon", 4, 0), ("other", 4, 1)]


# ---- grouping -------------------------------------------------------------------------

@given(sizes=st.lists(st.integers(1, 300), min_size=1, max_size=60),
       target=st.integers(50, 1000))
def test_grouping_packs_every_file_once_in_offset_order_up_to_the_target(
        sizes: list[int], target: int) -> None:
    files = [raw(i % 3, i * 10, i * 10 + 9, size=s) for i, s in enumerate(sizes)]
    groups = pack(files, target)
    flat = [f for g in groups for f in g]
    assert sorted(f.name for f in flat) == sorted(f.name for f in files)
    assert flat == sorted(files, key=InputFile.sort_key)
    for g in groups:
        assert len(g) == 1 or sum(f.size for f in g) <= target
    for g, nxt in zip(groups, groups[1:]):  # greedy: the next file did not fit
        assert sum(f.size for f in g) + nxt[0].size > target


def test_a_thousand_small_files_become_target_sized_outputs() -> None:
    files = [raw(p, i * 100, i * 100 + 99, size=1000) for p in range(4) for i in range(250)]
    w = {("local", "garmadon", p): 10**9 for p in range(4)}
    plan = plan_day("fs", "2026-11-01", files, w, 1, 100_000)
    assert len(plan.outputs) == 10
    assert sum(o.rows for o in plan.outputs) == sum(f.rows for f in files)
    assert plan.outputs[0].ranges()[0] == Range(0, 0, 99, 100)


def test_late_files_merge_with_an_undersized_compacted_file_but_not_a_large_one() -> None:
    small = compacted(1, 0, 100, (Range(0, 0, 99, 100),))
    large = compacted(1, 1, 900, (Range(1, 0, 999, 1000),))
    late = raw(0, 5000, 5001)
    w = {("local", "garmadon", 0): 6000}
    plan = plan_day("fs", "2026-11-01", [small, large, late], w, 2, 1000)
    assert [sorted(f.name for f in o.inputs) for o in plan.outputs] == [
        sorted([small.name, late.name])]
    assert dict(plan.left) == {large.name: "compacted"}
    assert plan.outputs[0].ranges() == (Range(0, 0, 99, 100), Range(0, 5000, 5001, 2))


def test_a_day_with_only_compacted_files_is_not_rewritten() -> None:
    small = compacted(1, 0, 100, (Range(0, 0, 99, 100),))
    plan = plan_day("fs", "2026-11-01", [small], {("local", "garmadon", 0): 99}, 2, 1000)
    assert plan.outputs == ()


def test_generations_only_grow_and_compacted_names_never_look_like_raw_ones() -> None:
    names = [CompactedName("local", "t", 7, 0).format(), FileName("local", "t", 3, 1).format()]
    assert next_generation(names) == 8
    assert next_generation(names, [9]) == 10
    assert next_generation([]) == 1
    assert FileName.parse(names[0]) is None
    assert CompactedName.parse(names[1]) is None
    assert CompactedName.parse("_SUCCESS") is None
    # a view kept for the grace, of a generation that left no compacted file (a repair
    # deleted a file whole): its number is taken
    assert next_generation([*names, "_g000011", "_gx", "g000012"]) == 12


class _Listing:
    def __init__(self, entries: dict[str, list[tuple[str, bool]]]) -> None:
        self.entries = entries

    def list(self, path: str) -> list[Entry]:
        return [Entry(n, d, 0) for n, d in self.entries.get(path, [])]


def test_a_new_generation_is_above_every_one_the_day_has_shown() -> None:
    """Compaction and repair take their generation from one reading of the day."""
    day = {"fs/day=2026-11-02": [(CompactedName("local", "t", 3, 0).format(), False),
                                 ("_g000007", True)],
           "_compaction/fs/day=2026-11-02": [("g000005.json", False)]}
    assert day_generation(_Listing(day), "fs", "2026-11-02") == 8  # type: ignore[arg-type]
    retired = {**day, "_compaction/_retired/fs/day=2026-11-02": [("g000009.json", False)]}
    assert day_generation(_Listing(retired), "fs", "2026-11-02") == 10  # type: ignore[arg-type]
    assert day_generation(_Listing({}), "fs", "2026-11-02") == 1  # type: ignore[arg-type]


# ---- completeness and Hive DDL --------------------------------------------------------

def test_a_day_is_complete_only_when_every_visible_file_is_compacted() -> None:
    c = compacted(3, 0, 10, (Range(0, 0, 9, 10),))
    names = [c.name, "_" + c.name, "_COMPLETE"]
    doc = complete.completion("fs", "2026-11-01", [c], names, True, 1, 60.0)
    assert doc is not None and doc["files"] == [c.name] and doc["rows"] == 10
    assert doc["generation"] == 3
    late = raw(0, 50, 51)
    assert complete.completion("fs", "2026-11-01", [c, late], names + [late.name], True, 1,
                               60.0) is None
    assert not complete.is_current(doc, names + [late.name])
    assert complete.is_current(doc, names)
    assert complete.completion("fs", "2026-11-01", [c], names, False, 1, 60.0) is None


def test_hive_adds_only_new_columns_and_reports_changed_types() -> None:
    table = [("a", "bigint"), ("B", "string"), ("day", "string")]
    data = [("a", "bigint"), ("b", "int"), ("c", "array<string>"), ("day", "string")]
    assert hive.new_columns(table, data) == ([("c", "array<string>")], ["b"])
    assert hive.add_columns_sql("db", "fs", [("c", "array<string>")]) == (
        "ALTER TABLE `db`.`fs` ADD COLUMNS (`c` array<string>)")
    sql = hive.create_table_sql("db", "fs", data, "file:///o/fs")
    assert "PARTITIONED BY (day STRING)" in sql and "`day`" not in sql
    assert hive.add_partitions_sql("db", "fs", [], "x") is None
    assert hive.add_partitions_sql("db", "fs", ["2026-11-01"], "hdfs://n/o/fs") == (
        "ALTER TABLE `db`.`fs` ADD IF NOT EXISTS PARTITION (day='2026-11-01') "
        "LOCATION 'hdfs://n/o/fs/day=2026-11-01'")


# ---- command line ---------------------------------------------------------------------

def test_command_line_options_win_over_the_config() -> None:
    import argparse

    from garmexport.cli.compact import add_arguments, options_from, spark_conf
    from garmexport.settings.config import Config
    from garmexport.errors import ConfigError

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = options_from(parser.parse_args([]), Config())
    assert defaults.lateness_s == Config().compaction.lateness_s
    assert defaults.root_uri.startswith("file:///") and defaults.hive and not defaults.dry_run
    args = parser.parse_args(["--output", "fs", "--output", "gc", "--lateness-s", "60",
                              "--sort-columns", "timestamp, kafka_offset", "--no-hive",
                              "--spark-conf", "spark.executor.memory=2g", "--dry-run"])
    opts = options_from(args, Config())
    assert opts.outputs == ("fs", "gc") and opts.lateness_s == 60.0 and not opts.hive
    assert opts.sort_columns == ("timestamp", "kafka_offset") and opts.dry_run
    assert spark_conf(args) == {"spark.executor.memory": "2g"}
    with pytest.raises(ConfigError):
        spark_conf(parser.parse_args(["--spark-conf", "novalue"]))


def test_output_roots_become_hadoop_uris() -> None:
    from garmexport.storage.hadoop_uri import spark_root

    assert spark_root("/data/out/") == "file:///data/out"
    assert spark_root("s3://bucket/out") == "s3a://bucket/out"
    assert spark_root("hdfs://nn:8020/out/") == "hdfs://nn:8020/out"


def test_the_grace_comes_from_the_config_or_the_command_line_and_the_sweep_from_the_delay(
        ) -> None:
    import argparse
    from dataclasses import replace

    from garmexport.cli.compact import add_arguments, options_from, sweep_every
    from garmexport.errors import ConfigError
    from garmexport.settings.config import Config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = Config()
    opts = options_from(parser.parse_args([]), config)
    assert opts.grace_s == config.compaction.retired_grace_s == 3600.0  # at least an hour
    assert opts.sweep_every_s == 15.0  # a quarter of the 60 s register delay
    assert options_from(parser.parse_args(["--grace-s", "0"]), config).grace_s == 0.0
    shorter = replace(config, hive=replace(config.hive, register_delay_s=2.0))
    assert options_from(parser.parse_args([]), shorter).sweep_every_s == 1.0
    assert sweep_every(20.0) == 5.0
    with pytest.raises(ConfigError, match="--grace-s -1.0"):
        options_from(parser.parse_args(["--grace-s", "-1"]), config)
