"""verify names the files: those holding each duplicate, those bordering each gap."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from garmexport.compaction.names import CompactedName
from garmexport.errors import ConfigError
from garmexport.protocol.naming import MS_PER_DAY, FileName, day_number
from garmexport.protocol.resume import PartitionState
from garmexport.storage.footer import FileFacts
from garmexport.storage.open import open_storage
from garmexport.verify.count import Report, check_topic, compare, expected_from_records, read_output
from garmexport.wire import frames
from garmexport.wire.events import HEADER, by_output
from garmexport.verify.findings import DuplicateGroup, Gap

DAY = "day=2026-11-01"


def write(root: Path, dataset: str, name: str, partition: int, offsets: range,
          day: str = DAY, facts: FileFacts | None = None) -> str:
    path = root / dataset / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"kafka_partition": [partition] * len(offsets),
                      "kafka_offset": list(offsets)})
    if facts is not None:
        table = table.replace_schema_metadata(facts.metadata())
    pq.write_table(table, path)
    return f"{dataset}/{day}/{name}"


def test_duplicates_name_the_files_holding_them_and_gaps_the_files_around_them(tmp_path):
    a = write(tmp_path, "fs", "a.parquet", 0, range(0, 100))
    b = write(tmp_path, "fs", "b.parquet", 0, range(50, 150))     # 50..99 twice
    d = write(tmp_path, "fs", "d.parquet", 0, range(200, 250))     # fs 150..199 lost
    e = write(tmp_path, "jvm", "e.parquet", 0, range(250, 300))   # jvm 300..309 lost at the end
    f = write(tmp_path, "jvm", "f.parquet", 1, range(0, 10))
    write(tmp_path, "jvm", "g.parquet", 1, range(5, 6))            # one offset, twice
    calls = []
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic",
                              lambda *a: calls.append(a))
    assert files == 6 and [c[:2] for c in calls] == [(n, 6) for n in range(1, 7)]
    assert calls[-1][2] == 100 + 100 + 50 + 50 + 10 + 1
    expected = {0: {**{o: "fs" for o in range(250)}, **{o: "jvm" for o in range(250, 310)}},
                1: {o: "jvm" for o in range(10)}}
    report = compare(held, files, expected)
    p0, p1 = report.partitions[0], report.partitions[1]
    assert p0.duplicate_files == [DuplicateGroup((a, b), 50, 99, 50)]
    assert p0.gaps == [Gap("fs", 150, 199, 50, b, d), Gap("jvm", 300, 309, 10, e, None)]
    assert p1.duplicate_files == [DuplicateGroup((f, f"jvm/{DAY}/g.parquet"), 5, 5, 1)]
    assert p1.gaps == []
    doc = report.to_dict()["partitions"]["0"]
    assert doc["duplicate_files"] == [{"files": [a, b], "first": 50, "last": 99, "count": 50}]
    assert doc["gaps"][0] == {"dataset": "fs", "first": 150, "last": 199, "count": 50,
                              "before": b, "after": d, "day": None,
                              "what": f"offsets 150..199 (50 missing) after {b} and before {d}"}
    assert doc["gap_count"] == 2 and doc["duplicate_groups"] == 1


def test_interleaved_losses_of_two_datasets_are_one_gap_each(tmp_path):
    write(tmp_path, "fs", "a.parquet", 0, range(0, 10, 2))
    write(tmp_path, "jvm", "b.parquet", 0, range(1, 10, 2))
    write(tmp_path, "fs", "c.parquet", 0, range(30, 40, 2))
    write(tmp_path, "jvm", "d.parquet", 0, range(31, 40, 2))
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")
    expected = {0: {o: ("fs" if o % 2 == 0 else "jvm") for o in range(40)}}
    gaps = compare(held, files, expected).partitions[0].gaps
    assert [(g.dataset, g.first, g.last, g.count, g.before, g.after) for g in gaps] == [
        ("fs", 10, 28, 10, f"fs/{DAY}/a.parquet", f"fs/{DAY}/c.parquet"),
        ("jvm", 11, 29, 10, f"jvm/{DAY}/b.parquet", f"jvm/{DAY}/d.parquet")]


def test_a_lost_file_amid_the_rows_of_another_day_is_one_gap_that_says_so(tmp_path):
    # fs of one partition over two days: the files of each day interleave in offsets
    a = write(tmp_path, "fs", "a.parquet", 0, range(0, 40, 2), day="day=2026-11-01")
    write(tmp_path, "fs", "b.parquet", 0, range(1, 40, 2), day="day=2026-11-02")
    (tmp_path / "fs" / "day=2026-11-02" / "b.parquet").unlink()  # lost
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")
    report = compare(held, files, {0: {o: "fs" for o in range(40)}})
    gaps = report.partitions[0].gaps
    # one finding for the odd offsets 1..37 amid a, one for 39 after it: not 19 gaps
    # "after a and before a"
    assert gaps == [Gap("fs", 1, 37, 19, a, a), Gap("fs", 39, 39, 1, a, None)]
    assert gaps[0].describe() == (
        f"offsets 1..37 (19 missing) amid the rows of {a}, which holds offsets on both "
        "sides: they were in another file of fs (of another day, or interleaved with it) "
        "that is gone")
    assert gaps[1].describe() == (f"offsets 39..39 (1 missing) after {a}, the last file of fs "
                                  "in this partition: lost, or not exported yet")
    assert Gap("fs", 0, 9, 10, None, a).describe() == (
        f"offsets 0..9 (10 missing) before {a}, the first file of fs in this partition")


def test_a_file_whose_name_disagrees_with_its_footer_or_rows_is_flagged(tmp_path):
    def name(partition: int, first: int) -> str:
        return FileName("c", "topic", partition, first).format()

    good = FileFacts("c", "topic", 0, 0, 9, 10)
    write(tmp_path, "fs", name(0, 0), 0, range(0, 10), facts=good)
    renamed = write(tmp_path, "fs", name(0, 20), 0, range(10, 20),
                    facts=FileFacts("c", "topic", 0, 10, 19, 10))
    short = write(tmp_path, "fs", name(0, 30), 0, range(30, 35),
                  facts=FileFacts("c", "topic", 0, 30, 39, 10))
    bare = write(tmp_path, "fs", name(1, 0), 1, range(0, 5))
    write(tmp_path, "fs", "not-ours.parquet", 0, range(40, 45))  # a foreign name: not checked
    disagreeing: list = []
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic", None, disagreeing)
    report = compare(held, files, None, disagreeing=disagreeing)
    assert not report.ok
    by_path = {d.path: d.problems for p in report.partitions.values() for d in p.disagreeing}
    assert set(by_path) == {renamed, short, bare}
    assert by_path[renamed] == (
        "the name says first offset 20, its rows start at 10",
        "the name says first offset 20, the footer 10")
    assert by_path[short] == ("the footer says 10 rows, the file holds 5",
                              "the footer says offsets 30..39, the rows hold 30..34")
    assert by_path[bare] == (
        "named like an exporter file, but its footer has no garmexport facts",)
    doc = report.to_dict()["partitions"]["0"]["disagreeing_files"]
    assert [d["path"] for d in doc] == sorted([renamed, short])
    assert doc[0]["what"].startswith(f"{renamed} disagrees with itself: the name says")


def test_a_file_named_almost_like_an_exporter_file_is_a_finding(tmp_path):
    """A first offset of 21 digits (or a partition of 4) is not a name the exporter's resume
    reads: its rows would be held where no chain sees them (issue 32, item 8: verify took
    it without a word). A foreign name stays unchecked."""
    good = FileName("c", "topic", 0, 0).format()
    write(tmp_path, "fs", good, 0, range(0, 10), facts=FileFacts("c", "topic", 0, 0, 9, 10))
    long = write(tmp_path, "fs", f"c+topic+00000+{10:021d}.parquet", 0, range(10, 20))
    short = write(tmp_path, "fs", f"c+topic+0001+{0:020d}.parquet", 1, range(0, 5))
    write(tmp_path, "fs", "not-ours.parquet", 0, range(20, 25))
    disagreeing: list = []
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic", None, disagreeing)
    report = compare(held, files, None, disagreeing=disagreeing)
    assert not report.ok
    by_partition = {p: [d.path for d in r.disagreeing] for p, r in report.partitions.items()
                    if r.disagreeing}
    assert by_partition == {0: [long], 1: [short]}, by_partition
    [finding] = report.partitions[0].disagreeing
    assert finding.problems == (
        "named like an exporter file but not one: partition 00000 (5 digits, 5 expected), "
        f"first offset {10:021d} (21 digits, 20 expected); the exporter's resume never "
        "reads it",)


def test_with_the_days_of_the_records_a_gap_is_bordered_by_the_files_of_its_own_day(tmp_path):
    d1, d2 = "day=2026-11-01", "day=2026-11-02"
    write(tmp_path, "fs", "a.parquet", 0, range(0, 40, 2), day=d1)
    b1 = write(tmp_path, "fs", "b1.parquet", 0, range(1, 20, 2), day=d2)
    write(tmp_path, "fs", "b2.parquet", 0, range(21, 30, 2), day=d2)
    b3 = write(tmp_path, "fs", "b3.parquet", 0, range(31, 40, 2), day=d2)
    (tmp_path / "fs" / d2 / "b2.parquet").unlink()  # lost
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")
    expected = {0: {o: "fs" for o in range(40)}}
    days = {0: {o: "2026-11-01" if o % 2 == 0 else "2026-11-02" for o in range(40)}}
    [gap] = compare(held, files, expected, days=days).partitions[0].gaps
    assert gap == Gap("fs", 21, 29, 5, b1, b3, "2026-11-02")
    assert gap.describe() == f"offsets 21..29 (5 missing) after {b1} and before {b3}"
    # a whole day gone: said so, not "amid" the other day's file
    for name in ("b1", "b3"):
        (tmp_path / "fs" / d2 / f"{name}.parquet").unlink()
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")
    [gap] = compare(held, files, expected, days=days).partitions[0].gaps
    assert gap == Gap("fs", 1, 39, 20, None, None, "2026-11-02")
    assert gap.describe() == ("offsets 1..39 (20 missing): no file of fs/day=2026-11-02 holds "
                              "a row of this partition")
    # rows not under the directory of their day (not the exporter's layout): the dataset's
    # files border the gap, as without the days
    days[0][0] = "2026-11-03"
    amid, after = compare(held, files, expected, days=days).partitions[0].gaps
    a = f"fs/{d1}/a.parquet"
    assert amid == Gap("fs", 1, 37, 19, a, a) and after == Gap("fs", 39, 39, 1, a, None)


def test_a_file_that_cannot_be_read_is_a_finding_and_the_other_files_are_read(tmp_path):
    a = write(tmp_path, "fs", "a.parquet", 0, range(0, 10))
    text = f"fs/{DAY}/b.parquet"
    (tmp_path / text).write_bytes(b"PAR1 a text that starts like Parquet")
    columnless = f"fs/{DAY}/c.parquet"  # Parquet, but without the Kafka columns
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / columnless)
    unreadable: list = []
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic", None, [], unreadable)
    assert files == 3 and held == {(0, o): [a] for o in range(10)}
    unreadable.sort(key=lambda u: u.path)  # in listing order, which the store decides
    assert [u.path for u in unreadable] == [text, columnless]
    assert unreadable[0].problem.startswith("not a Parquet file: "), unreadable
    assert unreadable[1].problem == ("a Parquet file without the columns kafka_partition, "
                                     "kafka_offset"), unreadable
    report = compare(held, files, {0: {o: "fs" for o in range(10)}}, unreadable=unreadable)
    assert report.partitions[0].ok and not report.ok
    doc = report.to_dict()
    assert doc["ok"] is False and doc["unreadable_count"] == 2
    assert doc["unreadable_files"][0] == {
        "path": text, "what": f"{text}: {unreadable[0].problem}"}


def test_a_root_of_another_topic_is_an_error_naming_both_topics_not_an_empty_ok(tmp_path):
    def published(topic: str, partition: int, offsets: range, dataset: str = "fs") -> str:
        return write(tmp_path, dataset, FileName("c", topic, partition, offsets[0]).format(),
                     partition, offsets, facts=FileFacts("c", topic, partition, offsets[0],
                                                         offsets[-1], len(offsets)))

    storage = open_storage(str(tmp_path), "t")
    topics: Counter[str] = Counter()
    held, _ = read_output(storage, "garmadon", None, [], [], topics)
    check_topic("garmadon", held, topics, str(tmp_path))  # an empty root: nothing to say
    published("t5", 0, range(0, 10))
    published("t5", 1, range(0, 10))
    # a compacted file has no garmexport footer: its name says the topic
    write(tmp_path, "gc", CompactedName("c", "t5", 1, 0).format(), 0, range(10, 11))
    held, files = read_output(storage, "garmadon", None, [], [], topics)
    assert files == 3 and held == {} and topics == {"t5": 3}
    with pytest.raises(ConfigError) as raised:
        check_topic("garmadon", held, topics, str(tmp_path))
    assert str(raised.value) == (
        f"source.topic (GARMEXPORT_SOURCE_TOPIC) = 'garmadon': no file under {tmp_path} holds "
        "a row of it; its files hold topic 't5' (3 files): set source.topic to the topic this "
        "root was written for, or correct output.root")
    # one file of the configured topic among them: its rows are checked, the others' not
    published("garmadon", 0, range(0, 5))
    topics.clear()
    held, files = read_output(storage, "garmadon", None, [], [], topics)
    assert set(held) == {(0, o) for o in range(5)} and topics == {"t5": 3, "garmadon": 1}
    check_topic("garmadon", held, topics, str(tmp_path))


def test_an_ok_without_the_broker_says_what_it_did_not_check(tmp_path):
    write(tmp_path, "fs", "a.parquet", 0, range(0, 10))
    write(tmp_path, "fs", "b.parquet", 0, range(20, 30))  # 10..19 lost: unseen without it
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")
    alone = compare(held, files, None)
    assert alone.ok and alone.verdict() == (
        "verify: OK without the broker: no duplicates, no file that disagrees with itself or "
        "cannot be read; not checked: missing records (a lost file, the end of a partition), "
        "misplaced and unexpected rows, as the output was not compared against the topic")
    assert alone.to_dict()["compared_with_broker"] is False
    expected = {0: {o: "fs" for o in [*range(0, 10), *range(20, 30)]}}
    both = compare(held, files, expected)
    assert both.verdict() == "verify: OK, every record exactly once"
    assert both.to_dict()["compared_with_broker"] is True
    assert compare(held, files, {0: {o: "fs" for o in range(30)}}).verdict() == "verify: FAILED"


def test_rows_older_than_the_brokers_retention_are_not_unexpected(tmp_path):
    """A topic trimmed by retention: the broker's first offset is 100 in partition 0 and
    partition 1 holds nothing any more (its end is 20); rows below those are not checked
    against the topic, but still for duplicates; a row past the end stays unexpected."""
    write(tmp_path, "fs", "a.parquet", 0, range(0, 150))
    write(tmp_path, "fs", "b.parquet", 0, range(40, 41))          # 40 twice, below retention
    write(tmp_path, "fs", "c.parquet", 1, range(0, 20))
    write(tmp_path, "fs", "d.parquet", 1, range(25, 26))          # past the end: unexpected
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")
    expected = {0: {o: "fs" for o in range(100, 150)}, 1: {}}
    report = compare(held, files, expected, first={0: 100, 1: 20})
    p0, p1 = report.partitions[0], report.partitions[1]
    assert (p0.before_retention, p0.unexpected, p0.duplicates) == (100, [], [40])
    assert (p1.before_retention, p1.unexpected) == (20, [25])
    assert report.to_dict()["partitions"]["0"]["before_retention"] == 100
    assert not report.ok
    held_once = {k: v[:1] for k, v in held.items() if k != (1, 25)}
    ok = compare(held_once, files, expected, first={0: 100, 1: 20})
    assert ok.ok and "120 rows older than its retention" in ok.verdict(), ok.verdict()
    # without the broker's first offsets (the old call), the same rows are unexpected
    assert len(compare(held_once, files, expected).partitions[0].unexpected) == 100


class _Rec:
    """A consumed record as verify reads it (confluent-kafka's Message duck type)."""

    def __init__(self, offset: int, value: bytes, kafka_ms: int) -> None:
        self._o, self._v, self._ms = offset, value, kafka_ms

    def value(self) -> bytes:
        return self._v

    def offset(self) -> int:
        return self._o

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ms)

    def key(self) -> None:
        return None


def _fs_records(bodies: dict[int, bytes], event_day: str, kafka_day: str) -> list[_Rec]:
    fs = by_output("fs")
    header = HEADER(hostname="h").SerializeToString()
    event_ms, kafka_ms = day_number(event_day) * MS_PER_DAY, day_number(kafka_day) * MS_PER_DAY
    return [_Rec(o, frames.encode(fs.marker, event_ms + o, header, b), kafka_ms + o)
            for o, b in sorted(bodies.items())]


def test_a_lost_quarantine_file_of_bad_bodies_is_a_gap_in_the_quarantine_of_its_kafka_day(tmp_path):
    # a late event (event day 11-01, in Kafka on 11-03) with a good head and a bad body: the
    # writer quarantines it on its Kafka day, so its loss is a gap there (issue 40)
    good, broken = by_output("fs").message(uri="u").SerializeToString(), b"\x0a\x7fxxxx"
    records = _fs_records({0: good, 1: good, 2: broken, 3: broken, 4: good, 5: broken},
                          "2026-11-01", "2026-11-03")
    write(tmp_path, "fs", "a.parquet", 0, range(0, 2))
    write(tmp_path, "fs", "b.parquet", 0, range(4, 5))
    q = tmp_path / "_quarantine" / "day=2026-11-03" / "q.parquet"  # holds 5; 2..3 lost
    q.parent.mkdir(parents=True)
    pq.write_table(pa.table({"kafka_partition": [0], "kafka_offset": [5], "topic": ["topic"]}), q)
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")
    days: dict[int, str] = {}
    expected = expected_from_records(0, records, days)
    assert expected == {0: "fs", 1: "fs", 2: "_quarantine", 3: "_quarantine", 4: "fs",
                        5: "_quarantine"}
    # the same when only records no dataset row holds have their frames checked (verify's
    # way): 5, in the quarantine only, is checked too, so its day is its Kafka day
    checked: dict[int, str] = {}
    assert expected_from_records(0, records, checked, held=held) == expected
    assert checked == days
    assert days[2] == days[5] == "2026-11-03" and days[0] == "2026-11-01"
    report = compare(held, files, {0: expected}, days={0: days})
    [gap] = report.partitions[0].gaps
    q_path = "_quarantine/day=2026-11-03/q.parquet"
    assert gap == Gap("_quarantine", 2, 3, 2, None, q_path, "2026-11-03")
    assert "the first file of _quarantine/day=2026-11-03" in gap.describe()
    assert report.partitions[0].missing == [2, 3]


def test_missing_records_above_the_committed_point_are_in_flight_not_missing(tmp_path):
    good = by_output("fs").message(uri="u").SerializeToString()
    records = _fs_records({o: good for o in range(10)}, "2026-11-01", "2026-11-01")
    write(tmp_path, "fs", "a.parquet", 0, range(0, 5))
    held, files = read_output(open_storage(str(tmp_path), "t"), "topic")

    def check(state: PartitionState) -> Report:
        above: set[int] = set()
        expected = expected_from_records(0, records, held=held, state=state, above=above)
        return compare(held, files, {0: expected}, ends={0: 10}, above={0: above})

    # W of fs is 6: 5 and 6 were published before the output was read, and are lost;
    # 7..9 are an exporter's to write
    lost = check(PartitionState(0, {"fs": 6}, has_marker=True))
    r = lost.partitions[0]
    assert (r.missing, r.in_flight, r.end, lost.ok) == ([5, 6], [7, 8, 9], 10, False)
    doc = lost.to_dict()["partitions"]["0"]
    assert (doc["end"], doc["in_flight"], doc["missing"]) == (10, 3, 2)
    flying = check(PartitionState(0, {"fs": 4}, has_marker=True))
    assert flying.ok and flying.partitions[0].in_flight == [5, 6, 7, 8, 9]
    assert flying.verdict() == ("verify: OK, every record exactly once; 5 records above the "
                                "committed points not published yet (in flight: the "
                                "exporters write them)")
    # no marker: nothing is committed, nothing can be told in flight: every one is missing
    unmarked = check(PartitionState(0)).partitions[0]
    assert (unmarked.missing, unmarked.in_flight) == ([5, 6, 7, 8, 9], [])
