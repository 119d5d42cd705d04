"""``garmexport verify``: every record exactly once, read back from the output.

It reads the Kafka coordinates (partition, offset) of every row that a reader of the
output can see (data files under ``<output>/day=*/``, compacted ones included, and
``_quarantine/day=*/``), and reports per topic and partition:

- duplicates: an offset held by more than one row, with the files that hold it;
- disagreeing files: a file named like the exporter's whose name, footer and rows
  disagree (partition, offsets, row count), or that has no footer facts, and a file
  whose name is shaped like the exporter's but is not one (a 21-digit offset);
- unreadable files: a visible file that is not Parquet (truncated, or another kind of
  file named like one), with pyarrow's reason; the other files are checked all the same;
- with the broker only: missing records (a record of an exported type, or a bad record,
  that no row holds) as gaps, each with the files just before and after it in its dataset
  or the quarantine (where the exporter's writer puts it:
  :mod:`garmexport.pipeline.placement`), misplaced ones (held, but in another type's
  dataset than its marker says), and unexpected rows (an offset the broker's records
  below the end do not have, or of a type that is not exported); and records **in
  flight**: missing records above the committed point (W) of their type in their
  partition, as the markers said before the output was read. An exporter has those and
  writes them (``repair`` leaves them too, :mod:`garmexport.repair.gaps`): they are
  counted, not findings. A partition without a marker has no committed point: every
  record it misses is missing. Without the broker, no gap, missing or misplaced record
  can be seen: an OK says so (:meth:`Report.verdict`), and those counts are not 0 but
  "not checked" (:meth:`Report.broker_count`: ``null`` in JSON, ``-`` in the table).

Which topic a file holds comes from its footer, else its name (an exporter or compacted
name), else it is taken to be the checked one (a file by hand, the JVM exporter's). When no
row of the checked topic is read but files of other topics are, ``source.topic`` is not
the topic the root was written for: :func:`check_topic` says so rather than report an
empty check as a clean one.

"The end" of a partition is its end as the topic's read began (the high watermark of its
first fetch, :mod:`garmexport.kafka.partition_end`): records after it are not read, so a
topic that records keep arriving at is read to a point. The output is read before the
topic, so every row it holds is of a record below the end (an exporter read the record
before it published the row): a row at or past the end is unexpected, as one beyond the
topic's data always was. Exit status is non-zero when anything is wrong. Only the two
columns needed are read from each file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from garmexport.compaction.names import CompactedName
from garmexport.errors import ConfigError
from garmexport.protocol.naming import QUARANTINE_DIR, FileName, day_name, parse_day_dir
from garmexport.protocol.resume import PartitionState
from garmexport.pipeline.placement import places
from garmexport.pipeline.router import Window, route
from garmexport.storage.base import Storage
from garmexport.storage.footer import KEY_PREFIX, FileFacts
from garmexport.verify.jvm_files import JvmRead
from garmexport.verify.findings import (
    Disagreement, DuplicateGroup, Gap, Unreadable, dataset_of, disagreement, duplicate_groups,
    gaps, misnamed, named_partition,
)
from garmexport.verify.read_file import read_table

COLUMNS = ["kafka_partition", "kafka_offset"]
_IN_QUARANTINE = QUARANTINE_DIR + "/"
#: duplicate groups and gaps listed per partition in the JSON report (the counts are whole)
LISTED = 100
#: progress(files read, files in all, rows read) while the output is read
Progress = Callable[[int, int, int], None]
_TOPIC_KEY = (KEY_PREFIX + "topic").encode()
#: a window no event time falls out of: a record's place by its frame alone
ANY_TIME = Window(past_ms=2**62, future_ms=2**62)


@dataclass
class PartitionReport:
    rows: int = 0
    quarantined: int = 0
    duplicates: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    misplaced: list[int] = field(default_factory=list)
    unexpected: list[int] = field(default_factory=list)
    broker_records: int | None = None
    #: the partition's end as the topic's read began (None: not read)
    end: int | None = None
    #: missing records above their type's committed point: an exporter writes them
    in_flight: list[int] = field(default_factory=list)
    #: rows below the first offset the broker still holds (retention took their records):
    #: checked for duplicates, not against the topic
    before_retention: int = 0
    #: rows of JVM exporter files among ``rows``, and their heartbeat rows (not in ``rows``)
    jvm_rows: int = 0
    heartbeats: int = 0
    duplicate_files: list[DuplicateGroup] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    disagreeing: list[Disagreement] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.misplaced or self.unexpected
                    or self.disagreeing)


@dataclass
class Report:
    partitions: dict[int, PartitionReport] = field(default_factory=dict)
    files: int = 0
    #: of ``files``, those the JVM exporter wrote; JVM files of another cluster tag (unread)
    jvm_files: int = 0
    foreign_jvm_files: list[str] = field(default_factory=list)
    #: visible files that could not be read (of no known partition: their rows are not)
    unreadable: list[Unreadable] = field(default_factory=list)
    #: False (``--no-broker``): no missing, misplaced nor unexpected record could be seen
    compared_with_broker: bool = True

    @property
    def ok(self) -> bool:
        return not self.unreadable and all(p.ok for p in self.partitions.values())

    def verdict(self) -> str:
        """The report's last line: what was found, and for an OK what it covers."""
        if not self.ok:
            return "verify: FAILED"
        old = sum(p.before_retention for p in self.partitions.values())
        flight = sum(len(p.in_flight) for p in self.partitions.values())
        tail = (f"; {flight} records above the committed points not published yet (in "
                "flight: the exporters write them)" if flight else "")
        if self.compared_with_broker and old:
            return (f"verify: OK, every record the broker still holds exactly once; {old} "
                    f"rows older than its retention checked for duplicates only{tail}")
        if self.compared_with_broker:
            return f"verify: OK, every record exactly once{tail}"
        return ("verify: OK without the broker: no duplicates, no file that disagrees with "
                "itself or cannot be read; not checked: missing records (a lost file, the "
                "end of a partition), misplaced and unexpected rows, as the output was not "
                "compared against the topic")

    def broker_count(self, found: list) -> int | None:
        """How many of a check made against the broker were found; None when it was not
        made (``--no-broker``), so that a check not made never reads as one passed."""
        return len(found) if self.compared_with_broker else None

    def to_dict(self) -> dict:
        n = self.broker_count
        return {
            "ok": self.ok,
            "compared_with_broker": self.compared_with_broker,
            "files": self.files,
            "jvm_files": self.jvm_files,
            "foreign_jvm_files": self.foreign_jvm_files[:LISTED],
            "unreadable_count": len(self.unreadable),
            "unreadable_files": [u.to_dict() for u in self.unreadable[:LISTED]],
            "partitions": {
                str(p): {
                    "rows": r.rows, "quarantined": r.quarantined,
                    "broker_records": r.broker_records, "end": r.end,
                    "in_flight": n(r.in_flight),
                    "before_retention": r.before_retention,
                    "jvm_rows": r.jvm_rows, "heartbeat_rows": r.heartbeats,
                    "duplicates": len(r.duplicates), "missing": n(r.missing),
                    "misplaced": n(r.misplaced), "unexpected": n(r.unexpected),
                    "examples": {k: getattr(r, k)[:10] for k in
                                 ("duplicates", "missing", "misplaced", "unexpected",
                                  "in_flight")
                                 if getattr(r, k)},
                    "duplicate_groups": len(r.duplicate_files),
                    "duplicate_files": [g.to_dict() for g in r.duplicate_files[:LISTED]],
                    "gap_count": n(r.gaps),
                    "gaps": [g.to_dict() for g in r.gaps[:LISTED]]
                    if self.compared_with_broker else None,
                    "disagreeing_files": [d.to_dict() for d in r.disagreeing],
                }
                for p, r in sorted(self.partitions.items())
            },
        }


def visible_files(storage: Storage) -> Iterable[tuple[str, str]]:
    """(dataset, path) of every Parquet file a reader sees: datasets and quarantine."""
    for top in storage.list(""):
        if not top.is_dir or (top.name.startswith((".", "_")) and top.name != QUARANTINE_DIR):
            continue
        for day in storage.list(top.name):
            if not day.is_dir or parse_day_dir(day.name) is None:
                continue
            for f in storage.list(f"{top.name}/{day.name}"):
                if not f.is_dir and f.name.endswith(".parquet") and not f.name.startswith((".", "_")):
                    yield top.name, f"{top.name}/{day.name}/{f.name}"


def read_output(storage: Storage, topic: str, progress: Progress | None = None,
                disagreeing: list[Disagreement] | None = None,
                unreadable: list[Unreadable] | None = None,
                topics: Counter[str] | None = None,
                ) -> tuple[dict[tuple[int, int], list[str]], int]:
    """Where each (partition, offset) of ``topic`` is held: the path of the file of each row
    (``dataset/day=D/name``; the same string object for every row of a file), and how many
    files were read. ``progress`` is called after each file; each file of ``topic`` named
    like the exporter's whose name, footer and rows disagree is added to ``disagreeing``,
    each file that cannot be read to ``unreadable`` (its rows count as held by none), and
    ``topics`` counts the files read per topic they hold (a quarantine file once for each
    topic of its rows), whichever topic that is."""
    held: dict[tuple[int, int], list[str]] = {}
    topics = Counter() if topics is None else topics
    listed = list(visible_files(storage))
    rows = 0
    unreadable = [] if unreadable is None else unreadable
    for files, (dataset, path) in enumerate(listed, 1):
        table = read_table(storage, path, unreadable, COLUMNS + (
            ["topic"] if dataset == QUARANTINE_DIR else []))
        if table is not None:
            rows += _hold(table, dataset, path, topic, held, disagreeing, topics)
        if progress is not None:
            progress(files, len(listed), rows)
    return held, len(listed)


def _hold(table: pa.Table, dataset: str, path: str, topic: str,
          held: dict[tuple[int, int], list[str]], disagreeing: list[Disagreement] | None,
          topics: Counter[str]) -> int:
    """Add the rows of ``topic`` in the file at ``path`` to ``held`` (the file to
    ``disagreeing`` if it disagrees with itself, and its topics to ``topics``); how many
    rows that was."""
    meta = table.schema.metadata or {}
    name = FileName.parse(path.rpartition("/")[2])
    if disagreeing is not None and name is not None and name.topic == topic:
        found = disagreement(path, name, _facts(meta),
                             table.column("kafka_partition").to_pylist(),
                             table.column("kafka_offset").to_pylist())
        if found is not None:
            disagreeing.append(found)
    if dataset == QUARANTINE_DIR:
        topics.update(set(table.column("topic").to_pylist()))
        table = table.filter(pa.compute.equal(table.column("topic"), topic))
    else:
        file_topic = topic_of(path.rpartition("/")[2], meta, topic)
        topics[file_topic] += 1
        if file_topic != topic:
            table = table.slice(0, 0)
        elif disagreeing is not None and (odd := misnamed(path)) is not None:
            disagreeing.append(odd)
    parts = table.column("kafka_partition").to_pylist()
    offs = table.column("kafka_offset").to_pylist()
    for p, o in zip(parts, offs):
        held.setdefault((p, o), []).append(path)
    return len(offs)


def topic_of(name: str, meta: Mapping[bytes, bytes], default: str) -> str:
    """The topic of the data file called ``name`` with footer metadata ``meta``: the
    footer's, else the name's (compacted files have no garmexport footer), else
    ``default``."""
    said = meta.get(_TOPIC_KEY)
    if said is not None:
        return said.decode()
    parsed = FileName.parse(name) or CompactedName.parse(name)
    return parsed.topic if parsed is not None else default


def check_topic(topic: str, held: Mapping[tuple[int, int], list[str]],
                topics: Mapping[str, int], where: str) -> None:
    """Raise ConfigError when no row of ``topic`` is ``held`` but the root ``where`` holds
    files of other ``topics`` (from :func:`read_output`): the check would be of nothing.
    An empty root passes (a topic not exported yet)."""
    others = sorted((t, n) for t, n in topics.items() if t != topic and n)
    if held or not others:
        return
    found = ", ".join(f"{t!r} ({n} file{'' if n == 1 else 's'})" for t, n in others)
    raise ConfigError(
        f"source.topic (GARMEXPORT_SOURCE_TOPIC) = {topic!r}: no file under {where} holds a "
        f"row of it; its files hold topic{'' if len(others) == 1 else 's'} {found}: set "
        "source.topic to the topic this root was written for, or correct output.root")


def _facts(meta: dict[bytes, bytes]) -> FileFacts | None:
    try:
        return FileFacts.from_metadata(meta)
    except ValueError:
        return None


def expected_from_records(partition: int, records: list,
                          days: dict[int, str] | None = None, *, window: Window = ANY_TIME,
                          held: Mapping[tuple[int, int], list[str]] | None = None,
                          state: PartitionState | None = None,
                          above: set[int] | None = None) -> dict[int, str]:
    """offset -> where that record must be held: its type's dataset, or ``_quarantine``,
    as the exporter's writer places it (:func:`garmexport.pipeline.placement.places`, with
    the event-time ``window`` the exporters run with); ``days`` gets offset -> the day
    (``YYYY-MM-DD``) whose directory it would be under.

    ``held`` (from :func:`read_output`): a record a row of a dataset holds is placed by
    the router alone, its frame not checked again: its place only matters to the check
    for misplaced rows, which a quarantine row passes whatever the place, and the check
    costs about as much as the routing. ``above`` gets the offsets above their type's
    committed point in ``state`` (the partition's, from the markers; none without one)."""
    routed = route(records, {}, window)
    expected: dict[int, str] = {}
    low_of = state.low_of if state is not None and state.has_marker else None
    for origin, batch in routed.batches.items():
        # the router's columns are int64 arrays: Python ints here, for JSON and day_name
        offsets = batch.offsets.tolist()
        check = None if held is None else [
            i for i, off in enumerate(offsets)
            if all(f.startswith(_IN_QUARANTINE) for f in held.get((partition, off), ()))]
        for off, (place, day) in zip(offsets, places(origin, batch, check)):
            expected[off] = place
            if days is not None:
                days[off] = day_name(day)
        if low_of is not None and above is not None:
            low = low_of(origin)
            above.update(off for off in offsets if off > low)
    return expected


def compare(held: dict[tuple[int, int], list[str]], files: int,
            expected: dict[int, dict[int, str]] | None, jvm: JvmRead | None = None, *,
            disagreeing: Iterable[Disagreement] = (), unreadable: Iterable[Unreadable] = (),
            days: Mapping[int, Mapping[int, str]] | None = None,
            first: Mapping[int, int] | None = None, ends: Mapping[int, int] | None = None,
            above: Mapping[int, set[int]] | None = None) -> Report:
    """Build the report; ``held``, ``disagreeing`` and ``unreadable`` from
    :func:`read_output` (and :func:`garmexport.verify.jvm_files.read_jvm`), ``expected``
    (per partition, offset -> dataset) from Kafka. Duplicates and gaps come with the files
    they are about (:mod:`garmexport.verify.findings`; ``days`` from
    :func:`expected_from_records` lets a gap name the files of its own day); a disagreeing
    file is listed under the partition its name gives. ``jvm``: what
    :func:`garmexport.verify.jvm_files.read_jvm` added to ``held`` (its files count in
    ``files`` here; its heartbeat rows are reported apart).

    A record of an exported type may legitimately be quarantined (bad body, event time
    outside the window): a row in ``_quarantine`` satisfies any expectation. ``first``: per
    partition, the first offset the broker still holds (the first record read, else the
    end reached); a row below it is counted in ``before_retention``, not as unexpected.
    ``ends``: per partition, the end of the topic's read (the broker's records below it
    are ``expected``), for the report. ``above``: per partition, offsets above their
    type's committed point (from :func:`expected_from_records`): a missing one is in
    flight, not missing.
    """
    report = Report(files=files, unreadable=sorted(unreadable, key=lambda u: u.path),
                    compared_with_broker=expected is not None)
    if jvm is not None:
        report.jvm_files, report.foreign_jvm_files = jvm.files, list(jvm.foreign)
        for p in set(jvm.rows) | set(jvm.heartbeats):
            r = report.partitions.setdefault(p, PartitionReport())
            r.jvm_rows, r.heartbeats = jvm.rows.get(p, 0), jvm.heartbeats.get(p, 0)
    for (p, o), paths in held.items():
        r = report.partitions.setdefault(p, PartitionReport())
        r.rows += len(paths)
        for path in paths:
            if path.startswith(_IN_QUARANTINE):
                r.quarantined += 1
        if len(paths) > 1:
            r.duplicates.append(o)
    missing: dict[int, dict[int, str]] = {}
    if expected is not None:
        for p, offsets in expected.items():
            r = report.partitions.setdefault(p, PartitionReport())
            r.broker_records = len(offsets)
            flying = (above or {}).get(p, set())
            for o, dataset in offsets.items():
                got = held.get((p, o))
                if not got and o in flying:
                    r.in_flight.append(o)
                elif not got:
                    r.missing.append(o)
                    missing.setdefault(p, {})[o] = dataset
                elif dataset_of(got[0]) not in (dataset, QUARANTINE_DIR):
                    r.misplaced.append(o)
        for p, end in (ends or {}).items():
            report.partitions.setdefault(p, PartitionReport()).end = end
        for (p, o) in held:
            if o not in expected.get(p, {}):
                if first is not None and p in first and o < first[p]:
                    report.partitions[p].before_retention += 1
                else:
                    report.partitions[p].unexpected.append(o)
    for p, r in report.partitions.items():
        for lst in (r.duplicates, r.missing, r.misplaced, r.unexpected, r.in_flight):
            lst.sort()
        r.duplicate_files = duplicate_groups(p, r.duplicates, held)
    for p, found in gaps(missing, held, days).items():
        report.partitions[p].gaps = found
    for d in sorted(disagreeing, key=lambda d: d.path):
        p = named_partition(d.path)
        p = -1 if p is None else p
        report.partitions.setdefault(p, PartitionReport()).disagreeing.append(d)
    return report
