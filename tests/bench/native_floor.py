"""The native floor: the least one process does for the exporter's output, without the protocol.

``python tests/bench/native_floor.py --bootstrap H:P --topic T --group G --events N --out DIR``
reads the topic from the start with its own consumer group (the read limit's settings)
and, per poll, with no Python step per record beyond fetching its value, offset and
partition from the client:

- reads every frame head of the poll at once (numpy, as the exporter's router does), keeps
  the whole frames of exported types and gathers them per (type, partition), picked by
  index; the rest (malformed, not exported) is dropped, not quarantined;
- decodes a (type, partition) once it holds ``--batch`` records, with the exporter's
  decoder the floor's way (:func:`garmexport.wire.columns.decode_batch` with
  ``check_first=False``: ptars first, upb only when ptars refuses the batch; not exact,
  see that function);
- keeps the tables per (type, day) (per (type, partition, day) with ``--per-partition``:
  the files garmexport's shape requires) and writes one Parquet file per group with the
  exporter's Parquet settings (:func:`garmexport.pipeline.parquet_io.to_parquet_bytes`:
  zstd, 256k-row groups, dictionaries except on the all-distinct columns) when it is
  large enough, over the budget, or at the end (``plain_pipeline.Sink``), without fsync;
- or, with ``--append`` (the NP floor, issue 42), exactly one file per (type, partition,
  day): a ``pyarrow.parquet.ParquetWriter`` opened on the group's first rows and kept open,
  each group's tables appended as a row group when they reach 256k rows (the exporter's
  row group size) or are the largest when all buffered tables exceed the budget, every
  writer closed at the end (:class:`AppendSink`): the least the shape's files cost, one
  open per file and no rewrite of what is written.

No actors, no routing rules beyond the frame head, no window, no intents, markers, links
or fsyncs, no quarantine files. The exporter's CPU per event above this floor is what the
protocol and the rest cost. Options, consume loop and JSON line are ``plain_pipeline.py``'s.
"""

from __future__ import annotations

import sys
import time
from operator import itemgetter, length_hint
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Message
from plain_pipeline import Sink, arguments, run  # tests/bench, the script's directory

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from garmexport.pipeline.parquet_io import (  # noqa: E402
    UNIQUE_COLUMNS, FileFacts, to_parquet_bytes,
)
from garmexport.protocol.naming import day_name  # noqa: E402
from garmexport.wire.columns import decode_batch  # noqa: E402
from garmexport.wire.events import REGISTRY  # noqa: E402
from garmexport.wire.frame_arrays import HEAD_DTYPE  # noqa: E402
from garmexport.wire.frames import HEAD_SIZE  # noqa: E402

#: to_parquet_bytes attaches file facts; the floor has no protocol, so these are fixed
_FACTS = FileFacts("floor", "floor", 0, 0, 0, 0)
#: marker -> whether its type is exported
_EXPORTED = np.zeros(max(REGISTRY) + 1, bool)
for _marker, _type in REGISTRY.items():
    _EXPORTED[_marker] = _type.output is not None
_PARTITIONS = 1 << 16  # a (type, partition) key is marker * _PARTITIONS + partition


def write_like_exporter(table: pa.Table, path: Path) -> None:
    """One Parquet file encoded as the exporter encodes its files, written without fsync."""
    path.write_bytes(to_parquet_bytes([table], _FACTS, "zstd"))


ROW_GROUP_ROWS = 256 * 1024  # the exporter's (to_parquet_bytes)


class AppendSink(Sink):
    """A file per (type, partition, day), opened once, row groups appended (module
    docstring); :class:`Sink`'s day split and budget, its ``files`` and ``written_rows``."""

    def __init__(self, out: Path, budget_bytes: int) -> None:
        super().__init__(out, ROW_GROUP_ROWS, budget_bytes, None, per_partition=True)
        self.writers: dict[tuple[str, int, int], pq.ParquetWriter] = {}

    def write(self, key: tuple[str, int, int]) -> None:
        tables = self.groups.pop(key)
        self.rows.pop(key), self.nbytes.pop(key)
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        writer = self.writers.get(key)
        if writer is None:
            output, partition, day = key
            directory = self.out / output / f"day={day_name(day)}"
            directory.mkdir(parents=True, exist_ok=True)
            schema = table.schema.with_metadata({**(table.schema.metadata or {}),
                                                 **_FACTS.metadata()})
            writer = self.writers[key] = pq.ParquetWriter(
                directory / f"part-{partition:05d}.parquet", schema, compression="zstd",
                use_dictionary=[n for n in schema.names if n not in UNIQUE_COLUMNS])
            self.files += 1
        writer.write_table(table.replace_schema_metadata(writer.schema.metadata),
                           row_group_size=ROW_GROUP_ROWS)
        self.written_rows += table.num_rows

    def close(self) -> None:
        super().close()
        for writer in self.writers.values():
            writer.close()
        self.writers.clear()


class Gather:
    """Whole frames per (type, partition), decoded per ``batch`` records into ``sink``."""

    def __init__(self, sink: Sink, batch: int) -> None:
        self.sink, self.batch = sink, batch
        self.pending: dict[int, tuple[list[bytes], list[np.ndarray]]] = {}

    def poll(self, msgs: list[Message]) -> None:
        n = len(msgs)
        values = list(map(Message.value, msgs))
        offsets = np.fromiter(map(Message.offset, msgs), np.int64, n)
        partitions = np.fromiter(map(Message.partition, msgs), np.int64, n)
        lengths = np.fromiter(map(length_hint, values), np.int64, n)  # None: 0
        heads = np.array(values, f"S{HEAD_SIZE}").view(HEAD_DTYPE)
        markers = heads["marker"].astype(np.int64)
        known = (markers >= 0) & (markers < len(_EXPORTED))
        header, body = heads["header"].astype(np.int64), heads["body"].astype(np.int64)
        whole = (known & _EXPORTED[np.where(known, markers, 0)] & (lengths >= HEAD_SIZE)
                 & (header >= 0) & (body >= 0) & (HEAD_SIZE + header + body == lengths))
        keys = np.where(whole, markers * _PARTITIONS + partitions, -1)
        for key in np.unique(keys[whole]).tolist():
            picked = np.flatnonzero(keys == key)
            held = self.pending.setdefault(key, ([], []))
            at = picked.tolist()
            held[0].extend(itemgetter(*at)(values) if len(at) > 1 else [values[at[0]]])
            held[1].append(offsets[picked])
            if len(held[0]) >= self.batch:
                self.decode(key)

    def decode(self, key: int) -> None:
        values, offsets = self.pending.pop(key)
        event_type = REGISTRY[key // _PARTITIONS]
        table, _failures = decode_batch(event_type, values, key % _PARTITIONS,
                                        np.concatenate(offsets), check_first=False)
        self.sink.add(event_type.output, table, key % _PARTITIONS)

    def finish(self) -> None:
        for key in list(self.pending):
            self.decode(key)


def main(argv: list[str] | None = None) -> int:
    start = time.time()
    args = arguments(__doc__, argv, append=True)
    sink: Sink
    if args.append:
        sink = AppendSink(Path(args.out), args.budget_bytes)
    else:
        sink = Sink(Path(args.out), args.file_rows, args.budget_bytes, write_like_exporter,
                    args.per_partition)
    gather = Gather(sink, args.batch)
    return run(args, start, sink, gather.poll, gather.finish)


if __name__ == "__main__":
    raise SystemExit(main())
