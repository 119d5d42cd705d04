"""The plain-Python baseline: the plainest single-process pipeline doing garmexport's work.

``python tests/bench/plain_pipeline.py --bootstrap H:P --topic T --group G --events N --out DIR``
reads the topic from the start with its own consumer group, checks every frame head, gathers
records per (type, partition) into batches of ``--batch`` records, decodes each batch with
the plain-Python reference decoder (:func:`garmexport.wire.columns_reference.decode_batch`, the
same Arrow columns as the exporter), splits the rows by UTC day of the event time and keeps
the tables per (type, day). A (type, day) group is written as one Parquet file (zstd, as
the exporter) when it reaches ``--file-rows`` rows, when all buffered tables exceed
``--budget-bytes`` (the largest group goes first), and at the end.

No actors, no commit protocol, no markers, no quarantine: it is the work without the
guarantees, the floor a plain implementation would reach. Prints one JSON line: ``consumed``,
``rows``, ``files``, ``first_record_wall_s``, ``done_wall_s`` (after the last file is
written), ``start_wall_s``, and the process's CPU seconds (all threads, librdkafka's
included) at the first record and at done, ``first_record_cpu_s`` and ``done_cpu_s``.
Exits 1 if ``--timeout-s`` passes before ``N`` records.

``native_floor.py`` runs the same consume loop (:func:`run`) and :class:`Sink`, with its
own handling of a poll and the exporter's Parquet settings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from baseline_consumer import baseline_consumer_settings  # noqa: E402 - tests/bench on sys.path
from confluent_kafka import Consumer, Message  # noqa: E402

from garmexport.wire.columns_reference import decode_batch  # noqa: E402
from garmexport.wire.events import REGISTRY  # noqa: E402
from garmexport.wire.frames import DecodeFailure, read_head  # noqa: E402
from garmexport.protocol.naming import day_name  # noqa: E402

MS_PER_DAY = 86_400_000


class Sink:
    """Tables per (output, day number), or per (output, partition, day number) with
    ``per_partition`` (the files garmexport's shape requires: one writer per type and
    partition); written as one Parquet file per group when flushed."""

    def __init__(self, out: Path, file_rows: int, budget_bytes: int,
                 write_file: Callable[[pa.Table, Path], None] | None = None,
                 per_partition: bool = False) -> None:
        self.out, self.file_rows, self.budget_bytes = out, file_rows, budget_bytes
        self.write_file = write_file or write_zstd
        self.per_partition = per_partition
        self.groups: dict[tuple[str, int, int], list[pa.Table]] = {}
        self.rows: dict[tuple[str, int, int], int] = {}
        self.nbytes: dict[tuple[str, int, int], int] = {}
        self.files = 0
        self.written_rows = 0

    def add(self, output: str, table: pa.Table, partition: int = 0) -> None:
        days = pc.divide(table.column("timestamp"), MS_PER_DAY)  # integer division (int64)
        for day in pc.unique(days).to_pylist():
            part = table.filter(pc.equal(days, day))
            key = (output, partition if self.per_partition else -1, day)
            self.groups.setdefault(key, []).append(part)
            self.rows[key] = self.rows.get(key, 0) + part.num_rows
            self.nbytes[key] = self.nbytes.get(key, 0) + part.nbytes
            if self.rows[key] >= self.file_rows:
                self.write(key)
        while self.nbytes and sum(self.nbytes.values()) > self.budget_bytes:
            self.write(max(self.nbytes, key=self.nbytes.__getitem__))

    def write(self, key: tuple[str, int, int]) -> None:
        output, _, day = key
        tables = self.groups.pop(key)
        self.rows.pop(key), self.nbytes.pop(key)
        directory = self.out / output / f"day={day_name(day)}"
        directory.mkdir(parents=True, exist_ok=True)
        table = pa.concat_tables(tables)
        self.write_file(table, directory / f"part-{self.files:05d}.parquet")
        self.files += 1
        self.written_rows += table.num_rows

    def close(self) -> None:
        for key in list(self.groups):
            self.write(key)


def write_zstd(table: pa.Table, path: Path) -> None:
    """One Parquet file, zstd as the exporter, Arrow's other defaults."""
    pq.write_table(table, path, compression="zstd", row_group_size=256 * 1024)


def arguments(description: str, argv: list[str] | None,
              append: bool = False) -> argparse.Namespace:
    """The options of this script and of ``native_floor.py`` (``append``: its
    ``--append``)."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=8192, help="records per decode call")
    parser.add_argument("--file-rows", type=int, default=1_000_000)
    parser.add_argument("--budget-bytes", type=int, default=256 * 1024 * 1024)
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--per-partition", action="store_true",
                        help="a file per (type, partition, day), as garmexport's shape "
                        "requires, not per (type, day)")
    if append:
        parser.add_argument("--append", action="store_true",
                            help="exactly one file per (type, partition, day), opened once, "
                            "row groups appended (the NP floor)")
    return parser.parse_args(argv)


def run(args: argparse.Namespace, start: float, sink: Sink,
        on_poll: Callable[[list[Message]], None], finish: Callable[[], None]) -> int:
    """The consume loop of this script and of ``native_floor.py``: each poll's records
    (errors left out) to ``on_poll`` until ``--events``, then ``finish`` and the sink's last
    files; prints the JSON line (module docstring)."""
    consumer = Consumer(baseline_consumer_settings(args.bootstrap, args.group))
    consumer.subscribe([args.topic])
    consumed, first, first_cpu = 0, None, None
    deadline = time.monotonic() + args.timeout_s
    try:
        while consumed < args.events and time.monotonic() < deadline:
            msgs = consumer.consume(10_000, 0.5)
            if any(map(Message.error, msgs)):
                msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                continue
            if first is None:
                first, first_cpu = time.time(), time.process_time()
            consumed += len(msgs)
            on_poll(msgs)
        finish()
        sink.close()
    finally:
        done, done_cpu = time.time(), time.process_time()
        consumer.close()
    print(json.dumps({"consumed": consumed, "rows": sink.written_rows, "files": sink.files,
                      "start_wall_s": start, "first_record_wall_s": first, "done_wall_s": done,
                      "first_record_cpu_s": first_cpu, "done_cpu_s": done_cpu,
                      "pid": os.getpid()}), flush=True)
    return 0 if consumed >= args.events else 1


def main(argv: list[str] | None = None) -> int:
    start = time.time()
    args = arguments(__doc__, argv)
    sink = Sink(Path(args.out), args.file_rows, args.budget_bytes, None, args.per_partition)
    pending: dict[tuple[int, int], tuple[list[bytes], list[int]]] = {}

    def decode(key: tuple[int, int]) -> None:
        values, offsets = pending.pop(key)
        event_type = REGISTRY[key[0]]
        table, _failures = decode_batch(event_type, values, key[1], offsets)
        sink.add(event_type.output, table, key[1])

    def on_poll(msgs: list[Message]) -> None:
        for msg in msgs:
            value = msg.value()
            head = read_head(value)
            if isinstance(head, DecodeFailure) or REGISTRY[head[0]].output is None:
                continue  # malformed or not exported: nothing to write
            key = (head[0], msg.partition())
            batch = pending.get(key)
            if batch is None:
                batch = pending[key] = ([], [])
            batch[0].append(value)
            batch[1].append(msg.offset())
            if len(batch[0]) >= args.batch:
                decode(key)

    def finish() -> None:
        for key in list(pending):
            decode(key)

    return run(args, start, sink, on_poll, finish)


if __name__ == "__main__":
    raise SystemExit(main())
