"""``garmexport verify`` over the files the Garmadon JVM exporter left in the root.

A root garmexport took over holds JVM files beside its own (docs/jvm-takeover.md), and a
reader of the tables sees both, so verify counts both: a record
held by a JVM row and a garmexport row is a duplicate, a record neither holds is missing,
with the files around it. So the JVM exporter's own gaps and duplicates (its lost late
events, its re-reads after two days down) show up too, before and after the switch.

- JVM files are ``<type>/day=D/<p>[.cluster=<c>].index=<n>`` (old names and bare ``D``
  directories too); the partition is in the name, the offset in ``kafka_offset``.
- Heartbeat rows (every column NULL but ``timestamp`` and ``kafka_offset``: the JVM's
  placeholder commits) are counted apart per partition, never as data: their
  ``kafka_offset`` is another record's.
- Files tagged with another Kafka cluster than ``[jvm] cluster`` hold another cluster's
  offsets: they are listed as foreign and not read.
- A file that cannot be read (truncated, not Parquet, no ``kafka_offset`` column) is
  listed in :attr:`JvmRead.unreadable` with the reason, as garmexport's own files are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from garmexport.protocol.jvm_names import JvmFile, day_of_dir
from garmexport.protocol.naming import parse_day_dir
from garmexport.storage.base import Storage
from garmexport.verify.findings import Unreadable
from garmexport.verify.read_file import read_table

#: the columns a heartbeat row sets; every other column of it is NULL
HEARTBEAT_SET = ("timestamp", "kafka_offset")


@dataclass
class JvmRead:
    files: int = 0
    rows: dict[int, int] = field(default_factory=dict)
    heartbeats: dict[int, int] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)


def jvm_files(storage: Storage, datasets: list[str]) -> list[tuple[str, JvmFile]]:
    """(path, parsed name) of every JVM exporter file under ``datasets``."""
    out = []
    for dataset in datasets:
        for d in storage.list(dataset):
            if d.is_dir and day_of_dir(d.name) is not None:
                for f in storage.list(f"{dataset}/{d.name}"):
                    parsed = None if f.is_dir else JvmFile.parse(f.name)
                    if parsed is not None:
                        out.append((f"{dataset}/{d.name}/{f.name}", parsed))
    return sorted(out)


def heartbeat_mask(table: pa.Table) -> pa.Array:
    """True for a heartbeat row: every column but :data:`HEARTBEAT_SET` is NULL."""
    mask = pa.array([True] * table.num_rows, pa.bool_())
    for name in table.column_names:
        if name not in HEARTBEAT_SET:
            mask = pc.and_(mask, pc.is_null(table.column(name)))
    return mask


def read_jvm(storage: Storage, held: dict[tuple[int, int], list[str]], cluster: str = "",
             progress: Callable[[int, int, int], None] | None = None) -> JvmRead:
    """Add the data rows of every JVM file of our cluster tag to ``held`` (as
    :func:`garmexport.verify.count.read_output` does for garmexport files)."""
    datasets = [e.name for e in storage.list("") if e.is_dir
                and not e.name.startswith((".", "_")) and parse_day_dir(e.name) is None]
    result = JvmRead()
    listed = jvm_files(storage, datasets)
    for done, (path, name) in enumerate(listed, 1):
        if name.cluster != cluster:
            result.foreign.append(path)
            continue
        table = read_table(storage, path, result.unreadable)
        if table is None:
            continue
        if "kafka_offset" not in table.column_names:  # its rows cannot be placed in Kafka
            result.unreadable.append(Unreadable(path, "a Parquet file without the column "
                                                      "kafka_offset"))
            continue
        beats = heartbeat_mask(table)
        p = name.partition
        n_beats = pc.sum(beats).as_py() or 0
        result.heartbeats[p] = result.heartbeats.get(p, 0) + n_beats
        data = table.filter(pc.invert(beats)).column("kafka_offset").to_pylist()
        result.rows[p] = result.rows.get(p, 0) + len(data)
        for o in data:
            held.setdefault((p, o), []).append(path)
        result.files += 1
        if progress is not None:
            progress(done, len(listed), sum(result.rows.values()))
    return result
