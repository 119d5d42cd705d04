"""Output that looks like the exporter's: raw day files with footers, and markers.

Until an exporter-produced day is run through compaction, the Spark tests and the
benchmark build their input with this: names from :mod:`garmexport.protocol.naming`, the footer
key-value metadata of every data file, the exporter's columns (a few header/body fields,
``timestamp`` int64 ms, ``kafka_partition`` int32, ``kafka_offset`` int64), and marker JSON
in the exporter's format (:class:`garmexport.protocol.resume.Marker`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from garmexport.protocol.naming import FileName, MarkerName, data_path, day_number, partition_dir
from garmexport.protocol.naming import MS_PER_DAY

SOURCE, TOPIC = "local", "garmadon"


def write_raw(root: str, output: str, day: str, partition: int, offsets: list[int],
              extra: str | None = None, source: str = SOURCE, topic: str = TOPIC) -> str:
    """Publish one raw file holding ``offsets`` of ``partition``; returns its name.

    ``extra`` adds a string column of that name (a .proto that gained a field).
    """
    n = len(offsets)
    base_ms = day_number(day) * MS_PER_DAY
    cols: dict[str, pa.Array] = {
        "application_id": pa.array([f"application_{o % 7}" for o in offsets]),
        "container_id": pa.array([f"container_{o % 13}" for o in offsets]),
        "src_path": pa.array([f"/data/{partition}/{o}/part-{o % 97:05d}" for o in offsets]),
        "action": pa.array(["READ" if o % 3 else "WRITE" for o in offsets]),
        "timestamp": pa.array([base_ms + (o * 7919) % MS_PER_DAY for o in offsets], pa.int64()),
        "kafka_partition": pa.array([partition] * n, pa.int32()),
        "kafka_offset": pa.array(offsets, pa.int64()),
    }
    if extra is not None:
        cols[extra] = pa.array([f"{extra}-{o}" for o in offsets])
    name = FileName(source, topic, partition, offsets[0])
    meta = {"garmexport.topic": topic, "garmexport.partition": str(partition),
            "garmexport.first_offset": str(offsets[0]),
            "garmexport.last_offset": str(offsets[-1]), "garmexport.rows": str(n),
            "garmexport.source": source}
    table = pa.table(cols).replace_schema_metadata(meta)
    path = os.path.join(root, data_path(output, day, name))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), "." + name.format() + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.link(tmp, path)  # exclusive publish, like the exporter's
    os.unlink(tmp)
    return name.format()


def write_day(root: str, output: str, day: str, partitions: int, files_per_partition: int,
              rows_per_file: int, first_offset: int = 0, extra: str | None = None
              ) -> list[tuple[int, int]]:
    """Many small raw files; every other offset is this type's (types are interleaved).

    Returns the (partition, offset) of every row written.
    """
    rows: list[tuple[int, int]] = []
    for p in range(partitions):
        for i in range(files_per_partition):
            start = first_offset + i * rows_per_file * 2
            offsets = list(range(start, start + rows_per_file * 2, 2))
            write_raw(root, output, day, p, offsets, extra)
            rows.extend((p, o) for o in offsets)
    return rows


def write_marker(root: str, partition: int, low: dict[str, int], written_at_ms: int,
                 low_event_ms: int | None = None, counter: int = 1,
                 source: str = SOURCE, topic: str = TOPIC) -> None:
    doc: dict[str, object] = {"version": 1, "partition": partition, "low": low, "days": {},
                              "processed": max(low.values(), default=0),
                              "written_at_ms": written_at_ms}
    if low_event_ms is not None:
        doc["low_event_ms"] = low_event_ms
    d = os.path.join(root, partition_dir(source, topic, partition))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, MarkerName("test", counter).format()), "w") as f:
        json.dump(doc, f)


def read_rows(root: str, output: str, day: str) -> list[tuple[int, int]]:
    """Every (kafka_partition, kafka_offset) readers of the day see, with pyarrow."""
    table = pq.read_table(os.path.join(root, output, f"day={day}"),
                          columns=["kafka_partition", "kafka_offset"],
                          partitioning=None)
    return sorted(zip(table["kafka_partition"].to_pylist(), table["kafka_offset"].to_pylist()))


def data_files(root: str, output: str, day: str) -> list[str]:
    d = os.path.join(root, output, f"day={day}")
    return sorted(n for n in os.listdir(d) if n.endswith(".parquet") and n[0] not in "_.")


def markers_for(root: str, lows: dict[int, dict[str, int]], event_ms: int,
                counter: int = 1) -> None:
    """One marker per partition p with W(output, p) = lows[p][output] and an event-time
    position; a higher ``counter`` is a newer marker beside the older ones."""
    for p, low in lows.items():
        write_marker(root, p, low, written_at_ms=event_ms, low_event_ms=event_ms,
                     counter=counter)


def tree(root: str) -> dict[str, str]:
    """Every file and directory under ``root``: relative path -> sha256 of its bytes
    (directories: "dir")."""
    found: dict[str, str] = {}
    for here, dirs, files in os.walk(root):
        for d in dirs:
            found[os.path.relpath(os.path.join(here, d), root)] = "dir"
        for f in files:
            path = os.path.join(here, f)
            found[os.path.relpath(path, root)] = hashlib.sha256(
                Path(path).read_bytes()).hexdigest()
    return found
