"""Build an output root as the Garmadon JVM HDFS exporter leaves it, with pyarrow.

The rows are the project's own: records (generated, or read back from the broker) are
classified by the exporter's router and decoded by its decoder, then written the JVM way
(docs/jvm-takeover.md, "Same tables, same queries"): no ``kafka_partition`` column, GZIP,
``<type>/day=D/<p>.index=<n>`` files of several row groups (the JVM merges small files by
appending row groups), an optional ``.cluster=<c>`` tag, an old ``<p>.<offset>`` name in a
bare ``D`` directory, heartbeat rows (only ``timestamp`` and ``kafka_offset`` set) and
``D/.<p>.done`` checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from garmexport.pipeline.router import Window, classify
from garmexport.protocol.naming import day_name
from garmexport.wire.columns import decode_batch
from garmexport.wire.events import by_output

WINDOW = Window(30 * 86_400_000, 3_600_000)


@dataclass(frozen=True)
class Rec:
    offset: int
    value: bytes
    kafka_ms: int


@dataclass
class JvmRoot:
    """What was written: per (origin, partition), the offsets of data rows and of
    heartbeat rows, and every file path."""

    data: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    heartbeats: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def high(self, origin: str, partition: int) -> int | None:
        """The highest kafka_offset (data or heartbeat) of (origin, partition)."""
        offs = self.data.get((origin, partition), []) + self.heartbeats.get((origin, partition), [])
        return max(offs, default=None)


def jvm_table(table: pa.Table) -> pa.Table:
    """A garmexport table as the JVM exporter's rows: no kafka_partition column."""
    return table.drop_columns(["kafka_partition"])


def heartbeat_rows(schema: pa.Schema, offsets: Sequence[int], ts_ms: Sequence[int]) -> pa.Table:
    """JVM heartbeat rows: every column NULL but ``timestamp`` and ``kafka_offset``."""
    cols = []
    for f in schema:
        if f.name == "timestamp":
            cols.append(pa.array(ts_ms, pa.int64()))
        elif f.name == "kafka_offset":
            cols.append(pa.array(offsets, pa.int64()))
        else:
            cols.append(pa.nulls(len(offsets), f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def write_jvm_file(path: Path, groups: Iterable[pa.Table]) -> None:
    """One JVM file, one row group per table (a merge appends row groups)."""
    groups = [g for g in groups if g.num_rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = groups[0].schema
    latest = max(int(np.max(g.column("timestamp").to_numpy(zero_copy_only=False))) for g in groups)
    schema = schema.with_metadata({b"latest_timestamp": str(latest).encode()})
    with pq.ParquetWriter(path, schema, compression="gzip") as w:
        for g in groups:
            w.write_table(g.replace_schema_metadata(schema.metadata), row_group_size=g.num_rows)


def jvm_name(partition: int, index: int, cluster: str = "") -> str:
    return f"{partition}{f'.cluster={cluster}' if cluster else ''}.index={index}"


def exported_chains(records: Mapping[int, Sequence[Rec]]) -> dict[tuple[str, str, int], list[Rec]]:
    """(origin, day, partition) -> its good records of exported types, in offset order, as
    the exporter's router classifies them (the JVM exporter never wrote the others)."""
    picked: dict[tuple[str, str, int], list[Rec]] = {}
    for p, recs in records.items():
        for r in recs:
            origin, day, reason, _ = classify(r.value, r.kafka_ms, WINDOW)
            if origin and not origin.startswith("_") and reason is None:
                picked.setdefault((origin, day_name(day), p), []).append(r)
    return picked


def decoded_chains(records: Mapping[int, Sequence[Rec]]
                   ) -> dict[tuple[str, str, int], tuple[pa.Table, list[int]]]:
    """(origin, day, partition) -> (JVM rows in offset order, their Kafka ms)."""
    picked = exported_chains(records)
    out = {}
    for (origin, day, p), recs in picked.items():
        table, bad = decode_batch(by_output(origin), [r.value for r in recs], p,
                                  np.array([r.offset for r in recs], np.int64))
        assert not bad, bad
        out[(origin, day, p)] = (jvm_table(table), [r.kafka_ms for r in recs])
    return out


def build(root: Path, records: Mapping[int, Sequence[Rec]], *, rows_per_file: int = 400,
          groups_per_file: int = 3, cluster: str = "", old_name_day: str | None = None,
          heartbeat_every: int = 0, skip_origins: Iterable[str] = ()) -> JvmRoot:
    """Write every given record the JVM way under ``root``; return what was written.

    - each (type, day, partition) chain is cut into files of ``rows_per_file`` rows, named
      ``index=1, 2, ...``, each made of ``groups_per_file`` row groups;
    - ``old_name_day``: that day's files get the old names ``<p>.<first offset>`` in a bare
      ``D`` directory (before September 2019);
    - ``heartbeat_every`` > 0: every that many records of a partition, each type with no
      row there gets one heartbeat row (offset = that record's), in the file of the
      record's day; heartbeats are written only where the type has a file that day;
    - every day but the newest gets ``D/.<p>.done`` checkpoints;
    - ``skip_origins``: types left with an empty directory (a type the JVM never saw).
    """
    out = JvmRoot()
    chains = decoded_chains(records)
    skip = set(skip_origins)
    for origin in skip:
        (root / origin).mkdir(parents=True, exist_ok=True)
    beats: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
    if heartbeat_every:
        for p, recs in records.items():
            for r in recs[heartbeat_every - 1::heartbeat_every]:
                day = day_name(r.kafka_ms // 86_400_000)
                for (o, d, pp) in chains:
                    if pp == p and d == day and o not in skip:
                        beats.setdefault((o, d, p), []).append((r.offset, r.kafka_ms))
    days = sorted({d for (_, d, _) in chains})
    for (origin, day, p), (table, _ms) in sorted(chains.items()):
        if origin in skip:
            continue
        hb = beats.get((origin, day, p), [])
        rows = table
        if hb:
            hb_table = heartbeat_rows(table.schema, [o for o, _ in hb], [t for _, t in hb])
            rows = pa.concat_tables([table, hb_table]).sort_by("kafka_offset")
            out.heartbeats.setdefault((origin, p), []).extend(o for o, _ in hb)
        out.data.setdefault((origin, p), []).extend(table.column("kafka_offset").to_pylist())
        old = day == old_name_day
        ddir = root / origin / (day if old else f"day={day}")
        for i, start in enumerate(range(0, rows.num_rows, rows_per_file)):
            part = rows.slice(start, rows_per_file)
            step = max(1, -(-part.num_rows // groups_per_file))
            groups = [part.slice(s, step) for s in range(0, part.num_rows, step)]
            first = part.column("kafka_offset")[0].as_py()
            name = f"{p}.{first}" if old else jvm_name(p, i + 1, cluster)
            write_jvm_file(ddir / name, groups)
            out.files.append(ddir / name)
        if day != days[-1]:
            done = root / origin / day / f".{p}.done"
            done.parent.mkdir(parents=True, exist_ok=True)
            done.touch()
    return out


def generated(count: int, *, partitions: int = 2, days: int = 3, seed: int = 5,
              now_ms: int = 1_793_700_000_000, late_share: float = 0.1) -> dict[int, list[Rec]]:
    """Generated records with the offsets a broker would give them (per partition, from 0)."""
    from garmexport.testbed.generator import Spec, generate

    spec = Spec(now_ms=now_ms, seed=seed, partitions=partitions, days=days, late_share=late_share)
    out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    for r in generate(spec, count):
        out[r.partition].append(Rec(len(out[r.partition]), r.value, r.timestamp_ms))
    return out


def write_garmexport(root: Path, records: Mapping[int, Sequence[Rec]], rows_per_file: int = 400,
                     source: str = "local", topic: str = "garmadon") -> list[Path]:
    """The given records as garmexport publishes them (its decoder, its file writer, its
    names): for a half-JVM, half-garmexport day without running the exporter."""
    from garmexport.pipeline.parquet_io import FileFacts, to_parquet_bytes
    from garmexport.protocol.naming import FileName, data_path

    paths = []
    for (origin, day, p), recs in sorted(exported_chains(records).items()):
        for start in range(0, len(recs), rows_per_file):
            part = recs[start:start + rows_per_file]
            table, bad = decode_batch(by_output(origin), [r.value for r in part], p,
                                      np.array([r.offset for r in part], np.int64))
            assert not bad, bad
            facts = FileFacts(source, topic, p, part[0].offset, part[-1].offset, table.num_rows)
            path = root / data_path(origin, day, FileName(source, topic, p, part[0].offset))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(to_parquet_bytes([table], facts, "zstd"))
            paths.append(path)
    return paths
