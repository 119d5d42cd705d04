"""``garmexport verify``: every record exactly once, read back from the output.

It reads the Kafka coordinates (partition, offset) of every row that a reader of the
output can see (data files under ``<output>/day=*/``, compacted ones included, and
``_quarantine/day=*/``), and reports per topic and partition:

- duplicates: an offset held by more than one row;
- with the broker: missing records (a record of an exported type, or a bad record, that no
  row holds), misplaced ones (held, but in another type's dataset than its marker says),
  and unexpected rows (an offset beyond the data read from the broker, or of a type that
  is not exported).

"End of data" on the broker is the partition EOF reached by an assigned consumer, never a
queried high watermark (wrong on some brokers). Exit status is non-zero when anything is
wrong. Only the two columns needed are read from each file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from garmexport.naming import QUARANTINE_DIR, parse_day_dir
from garmexport.router import Window, route
from garmexport.storage.base import Storage

COLUMNS = ["kafka_partition", "kafka_offset"]


@dataclass
class PartitionReport:
    rows: int = 0
    quarantined: int = 0
    duplicates: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    misplaced: list[int] = field(default_factory=list)
    unexpected: list[int] = field(default_factory=list)
    broker_records: int | None = None

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.misplaced or self.unexpected)


@dataclass
class Report:
    partitions: dict[int, PartitionReport] = field(default_factory=dict)
    files: int = 0

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions.values())

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "files": self.files,
            "partitions": {
                str(p): {
                    "rows": r.rows, "quarantined": r.quarantined,
                    "broker_records": r.broker_records,
                    "duplicates": len(r.duplicates), "missing": len(r.missing),
                    "misplaced": len(r.misplaced), "unexpected": len(r.unexpected),
                    "examples": {k: getattr(r, k)[:10] for k in
                                 ("duplicates", "missing", "misplaced", "unexpected")
                                 if getattr(r, k)},
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


def read_output(storage: Storage, topic: str) -> tuple[dict[tuple[int, int], list[str]], int]:
    """Where each (partition, offset) of ``topic`` is held: a list of datasets, one per row."""
    held: dict[tuple[int, int], list[str]] = {}
    files = 0
    for dataset, path in visible_files(storage):
        table = pq.read_table(pa.BufferReader(storage.read(path)), columns=COLUMNS + (
            ["topic"] if dataset == QUARANTINE_DIR else []))
        meta = table.schema.metadata or {}
        file_topic = meta.get(b"garmexport.topic", topic.encode()).decode()
        files += 1
        if dataset == QUARANTINE_DIR:
            table = table.filter(pa.compute.equal(table.column("topic"), topic))
        elif file_topic != topic:
            continue
        parts = table.column("kafka_partition").to_pylist()
        offs = table.column("kafka_offset").to_pylist()
        for p, o in zip(parts, offs):
            held.setdefault((p, o), []).append(dataset)
    return held, files


def expected_from_records(partition: int, records: list) -> dict[int, str]:
    """offset -> dataset where that record must be held (its type's, or _quarantine)."""
    routed = route(records, {}, Window(past_ms=2**62, future_ms=2**62))
    expected: dict[int, str] = {}
    for origin, batch in routed.batches.items():
        bad = {i for i, *_ in batch.bad}
        for i, off in enumerate(batch.offsets):
            expected[off] = QUARANTINE_DIR if i in bad else origin
    return expected


def compare(held: dict[tuple[int, int], list[str]], files: int,
            expected: dict[int, dict[int, str]] | None) -> Report:
    """Build the report; ``expected`` (per partition, offset -> dataset) comes from Kafka.

    A record of an exported type may legitimately be quarantined (bad body, event time
    outside the window): a row in ``_quarantine`` satisfies any expectation.
    """
    report = Report(files=files)
    for (p, o), datasets in held.items():
        r = report.partitions.setdefault(p, PartitionReport())
        r.rows += len(datasets)
        r.quarantined += datasets.count(QUARANTINE_DIR)
        if len(datasets) > 1:
            r.duplicates.append(o)
    if expected is not None:
        for p, offsets in expected.items():
            r = report.partitions.setdefault(p, PartitionReport())
            r.broker_records = len(offsets)
            for o, dataset in offsets.items():
                got = held.get((p, o))
                if not got:
                    r.missing.append(o)
                elif got[0] != dataset and got[0] != QUARANTINE_DIR:
                    r.misplaced.append(o)
        for (p, o) in held:
            if o not in expected.get(p, {}):
                report.partitions[p].unexpected.append(o)
    for r in report.partitions.values():
        for lst in (r.duplicates, r.missing, r.misplaced, r.unexpected):
            lst.sort()
    return report

