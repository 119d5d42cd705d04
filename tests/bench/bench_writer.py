"""CPU of the writers handling their batches: ``OriginWriter.handle_batch`` alone.

``python tests/bench/bench_writer.py [--events 250000] [--rounds 5] [--publish] [--profile]``

The batches are the ones the writers of one partition get: generator records (the default
type mix, several days, 5 % late, ``--bad-share`` bad) routed poll by poll by the reader's
router and gathered per origin until ``writer.decode_batch_records`` (8192), as the reader
hands them over (``pipeline.messages.Batch``). They are built once, outside the measure.

Each round gives every origin a fresh :class:`OriginWriter` over a :class:`LocalStorage`
in a temporary directory and times (``time.process_time``) its ``handle_batch`` over all
the batches. Without ``--publish`` the file limits are out of reach, so nothing is
published: the measure is decode and bookkeeping. With ``--publish`` the default limits
apply and the open files are published at the end (``flush``), inside the measure.

Prints medians over the rounds of CPU-seconds per 1M records handed to the writers,
for all origins and for the most frequent one; ``--profile`` adds a cProfile of one
round (sorted by own time). It also prints what of "all" went to the upb check
(``upb_check.find_bad``, bodies and distinct headers, which the exporter runs over every
batch: DESIGN.md 9.9), and with ``--publish`` what went to encoding the files (``to_parquet_bytes``) and to the commit protocol's own steps
(``publish_file``: the intent, the staged write, its fsyncs and the exclusive link), and
the CPU of one marker write (``write_marker``, fsyncs included) on the same store.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from garmexport.settings.config import Config  # noqa: E402
from garmexport.settings.load import load_config  # noqa: E402
from garmexport.pipeline import origin_writer, publisher  # noqa: E402
from garmexport.wire import upb_check  # noqa: E402
from garmexport.pipeline.messages import Batch  # noqa: E402
from garmexport.pipeline.origin_writer import OriginWriter  # noqa: E402
from garmexport.pipeline.router import OriginBatch, Window, route  # noqa: E402
from garmexport.protocol.resume import OriginState  # noqa: E402
from garmexport.storage.local import LocalStorage  # noqa: E402
from garmexport.testbed.generator import Spec, generate  # noqa: E402
from kafka_records import PyRecord  # noqa: E402 - tests/bench, the script's directory

NOW_MS = 1_795_300_000_000
POLL = 2000  # records per poll handed to the router


def _config(root: str, publish: bool) -> Config:
    env = {"GARMEXPORT_OUTPUT_ROOT": root}
    if not publish:
        env |= {"GARMEXPORT_WRITER_MAX_FILE_ROWS": str(10**9),
                "GARMEXPORT_WRITER_MAX_FILE_BYTES": str(10**15),
                "GARMEXPORT_WRITER_MAX_FILE_AGE_S": str(10**9)}
    return load_config(None, env)


def make_batches(events: int, bad_share: float, days: int, seed: int,
                 batch_records: int = 8192) -> list[tuple[str, Batch]]:
    """(origin, batch) of one partition, in the order the reader would send them."""
    cfg = load_config(None, {})
    p = cfg.protocol
    window = Window(int(p.event_time_past_days * 86_400_000), int(p.event_time_future_s * 1000),
                    p.out_of_window == "clamp")
    spec = Spec(now_ms=NOW_MS, seed=seed, partitions=1, days=days, bad_share=bad_share)
    records = [PyRecord(i, r.value, r.timestamp_ms) for i, r in enumerate(generate(spec, events))]
    out: list[tuple[str, Batch]] = []
    pending: dict[str, OriginBatch] = {}

    def send(origin: str, b: OriginBatch, upto: int) -> None:
        out.append((origin, Batch(1, upto, b.offsets, tuple(b.values),
                                  b.kafka_ts, b.days, tuple(b.bad), b.nbytes)))

    for start in range(0, len(records), POLL):
        routed = route(records[start:start + POLL], {}, window)
        for origin, b in routed.batches.items():
            if origin in pending:
                pending[origin].extend(b)
            else:
                pending[origin] = b
        for origin, b in list(pending.items()):
            if len(b.offsets) >= batch_records:
                send(origin, pending.pop(origin), routed.last_offset)
    for origin, b in pending.items():
        send(origin, b, len(records) - 1)
    return out


@contextlib.contextmanager
def timing(spent: dict[str, float]):  # noqa: ANN201 - a context manager
    """Count the CPU seconds of the writer's upb checks, encodes and publishes into ``spent``."""
    def timed(name, fn):  # noqa: ANN001, ANN202
        def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            c0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - c0
                spent[name + " calls"] = spent.get(name + " calls", 0) + 1
        return call

    saved = origin_writer.to_parquet_bytes, origin_writer.publish_file, upb_check.find_bad
    origin_writer.to_parquet_bytes = timed("encode", saved[0])
    origin_writer.publish_file = timed("protocol", saved[1])
    upb_check.find_bad = timed("upb check", saved[2])
    try:
        yield spent
    finally:
        origin_writer.to_parquet_bytes, origin_writer.publish_file, upb_check.find_bad = saved


def marker_cpu_s(writes: int = 200) -> float:
    """CPU seconds of one marker write (JSON, staged write, fsyncs, link) on a LocalStorage."""
    from garmexport.protocol.naming import MarkerName
    from garmexport.protocol.resume import Marker

    with tempfile.TemporaryDirectory() as root:
        storage = LocalStorage(root, "bench")
        marker = Marker(0, {o: 10**9 for o in ("fs", "container", "_frame")}, {}, 10**9, 0, 0)
        c0 = time.process_time()
        for i in range(writes):
            publisher.write_marker(storage, "bench", "t", MarkerName("bench", i), marker)
        return (time.process_time() - c0) / writes


def one_round(batches: list[tuple[str, Batch]], publish: bool) -> dict[str, float]:
    """CPU seconds of handle_batch per origin (plus "all"), fresh writers."""
    with tempfile.TemporaryDirectory() as root:
        cfg = _config(root, publish)
        storage = LocalStorage(root, "bench")
        writers: dict[str, OriginWriter] = {}
        for origin in {o for o, _ in batches}:
            w = writers[origin] = OriginWriter(cfg, storage, origin, 0, clock=lambda: 0.0)
            w.reset(1, OriginState(-1, {}), -1)
        spent: dict[str, float] = dict.fromkeys(writers, 0.0)
        for origin, batch in batches:
            w = writers[origin]
            c0 = time.process_time()
            w.handle_batch(batch)
            spent[origin] += time.process_time() - c0
        if publish:
            for origin, w in writers.items():
                c0 = time.process_time()
                w.flush()
                spent[origin] += time.process_time() - c0
    spent["all"] = sum(spent.values())
    return spent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=250_000,
                        help="generated records of the partition (default 250000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bad-share", type=float, default=0.002)
    parser.add_argument("--days", type=int, default=3, help="days the stream spans")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch-records", type=int, default=8192,
                        help="records the reader gathers per origin before sending (default "
                             "8192, writer.decode_batch_records; a batch sent for its age is "
                             "smaller)")
    parser.add_argument("--publish", action="store_true",
                        help="default file limits, publishing inside the measure")
    parser.add_argument("--profile", action="store_true", help="cProfile one more round")
    args = parser.parse_args(argv)
    batches = make_batches(args.events, args.bad_share, args.days, args.seed,
                           args.batch_records)
    records: dict[str, int] = {}
    for origin, b in batches:
        records[origin] = records.get(origin, 0) + len(b.offsets)
    records["all"] = sum(records.values())
    top = max((o for o in records if o != "all"), key=records.__getitem__)
    one_round(batches, args.publish)  # warm caches (ptars handlers, upb wrappers)
    rounds, parts = [], []
    for _ in range(args.rounds):
        with timing({}) as spent:
            rounds.append(one_round(batches, args.publish))
        parts.append(spent)
    print(f"{len(batches)} batches, {records['all']} records "
          f"({top}: {records[top]} in {sum(o == top for o, _ in batches)} batches); "
          f"publishing {'on' if args.publish else 'off'}; medians of {args.rounds} rounds")
    for name in ("all", top):
        per_m = [r[name] / records[name] * 1e6 for r in rounds]
        print(f"  {name:12} {statistics.median(per_m):6.3f} CPU-s per 1M records "
              f"(min {min(per_m):.3f}, max {max(per_m):.3f})")
    per_m = [p.get("upb check", 0.0) / records["all"] * 1e6 for p in parts]
    print(f"  of all, upb check {statistics.median(per_m):6.3f} CPU-s per 1M records")
    if args.publish:
        for name in ("encode", "protocol"):
            per_m = [p.get(name, 0.0) / records["all"] * 1e6 for p in parts]
            per_file = [p.get(name, 0.0) / max(p.get(name + " calls", 0), 1) * 1e3 for p in parts]
            print(f"  of all, {name:9} {statistics.median(per_m):6.3f} CPU-s per 1M records, "
                  f"{statistics.median(per_file):.3f} CPU-ms per file "
                  f"({parts[0].get(name + ' calls', 0)} files a round)")
        print(f"  one marker write: {marker_cpu_s() * 1e3:.3f} CPU-ms")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        one_round(batches, args.publish)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
