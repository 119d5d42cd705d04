"""Which CPU steps of the exporter release the GIL: 2 threads against 1, step by step.

``python tests/bench/gil_release.py [--rounds 5] [--seconds 0.4] [--steps frames,upb,...]``

For each step the same unit of work (one batch of 8192 records of the most frequent type,
see ``cores_data``; Parquet: a file of 4 batches) is run ``n`` times by one thread, then
``n`` times by each of two threads started together (``n`` is chosen so one thread takes
about ``--seconds`` of CPU). A round is one such pair, run back to back; the order within a pair
alternates between rounds. Per step it prints medians over the rounds of:

- ``speedup``: throughput of the 2 threads over that of 1 (2.0: the step runs in parallel,
  1.0: it holds the GIL throughout);
- ``runnable 2``: the headline, and the figure that does not depend on other work on the
  machine. Linux counts per thread the time it ran and the time it waited, runnable, for a
  core (``/proc/thread-self/schedstat``); a thread waiting for the GIL sleeps and counts in
  neither. Their sum over the 2 threads, over the wall time, is 2.0 if neither thread ever
  waits for the GIL (both always want a core), 1.0 if one always does (the step holds it
  throughout). In between it is not simply the share run without the GIL: a step that holds
  it half the time can reach 2.0 when the threads take turns. The ``upb alone`` step
  separates the part of the upb check that holds it. (``runnable 1``: 1 thread, 1.0.)
  The switch interval is raised to 1 s while measuring (``--switch-interval-s``): at the
  default 5 ms a thread waiting for the GIL wakes every 5 ms to ask for it, and on a loaded
  machine each wake-up waits for a core, which counts as runnable. Code that releases the
  GIL hands it over by itself, so the interval does not change its figure.
- ``util 1``, ``util 2``: process CPU seconds over wall seconds while 1 and 2 threads run:
  what the threads got of the cores, which on a loaded machine is below what they wanted;
- CPU milliseconds per unit alone and with 2 threads (a step that holds the GIL costs more
  CPU per unit with 2 threads: the handovers).

Two controls bound what this machine shows at that moment: a pure-Python loop (holds the
GIL: the floor) and hashlib's sha256 of 4 MiB (releases it: the ceiling). On a machine
shared with other work, the ceiling is below 2.0; compare each step with the controls.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
import threading
import time

import pyarrow as pa
from cores_data import Batch, batches, loadavg, median  # tests/bench, the script's directory

from garmexport.wire import columns, frame_arrays, upb_check
from garmexport.wire.events import HEADER
from garmexport.wire.frames import Reason
from garmexport.pipeline.parquet_io import FileFacts, to_parquet_bytes

FACTS = FileFacts("bench", "bench", 0, 0, 0, 0)


def prepare(batch: Batch, file_batches: list[Batch]) -> dict:
    """The unit of work of each step, as a callable with its input bound."""
    frames = frame_arrays.frames_array(batch.values)
    _, headers, bodies = frame_arrays.split(frames)
    message = batch.event_type.message
    bad = {i for i, _ in upb_check.find_bad(message, bodies, Reason.BAD_BODY)}
    bad |= {i for i, _ in upb_check.find_bad(HEADER, headers, Reason.BAD_HEADER)}
    keep = pa.array([i not in bad for i in range(len(bodies))])
    good_bodies, good_headers = bodies.filter(keep), headers.filter(keep)
    body_handler = columns._handler(message.DESCRIPTOR)
    header_handler = columns._handler(HEADER.DESCRIPTOR)
    body_batch = body_handler.array_to_record_batch(good_bodies)
    distinct = columns._Distinct.of(good_headers)
    header_batch = header_handler.array_to_record_batch(distinct.values)
    header_fields, body_fields = HEADER.DESCRIPTOR.fields, message.DESCRIPTOR.fields
    table = columns.decode_batch(batch.event_type, batch.values, 0, batch.offsets)[0]
    file_tables = [columns.decode_batch(b.event_type, b.values, 0, b.offsets)[0]
                   for b in file_batches]
    wrapper = upb_check._wrappers()[message.DESCRIPTOR.full_name]
    whole = wrapper(item=[message.FromString(v.as_py()) for v in good_bodies]).SerializeToString()
    zstd = pa.Codec("zstd")
    data = frames.buffers()[2]
    blob = b"x" * (4 << 20)

    def post_process():  # what decode_batch does with Arrow compute after ptars
        arrays = [columns._nulled(header_batch.column(f.name), f) for f in header_fields]
        if distinct.index is not None:
            pa.Table.from_arrays(arrays, names=columns._HEADER_NAMES).take(distinct.index)
        [columns._nulled(body_batch.column(f.name), f) for f in body_fields]

    def python_loop():
        total = 0
        for i in range(200_000):
            total += i * i
        return total

    return {
        "control: pure Python (holds the GIL)": python_loop,
        "control: sha256 of 4 MiB (releases it)": lambda: hashlib.sha256(blob).digest(),
        "frames: cut into header/body arrays (Arrow, numpy)":
            lambda: frame_arrays.split(frame_arrays.frames_array(batch.values)),
        "upb check of the bodies (with the batch's bad ones)":
            lambda: upb_check.find_bad(message, bodies, Reason.BAD_BODY),
        "upb check of good bodies only (no bisection)":
            lambda: upb_check.find_bad(message, good_bodies, Reason.BAD_BODY),
        "upb alone: parse of the good bodies' wrapper message": lambda: wrapper.FromString(whole),
        "ptars: good bodies to a record batch": lambda: body_handler.array_to_record_batch(good_bodies),
        "Arrow compute: decode_batch's post-processing": post_process,
        "decode_batch, whole": lambda: columns.decode_batch(batch.event_type, batch.values, 0,
                                                            batch.offsets),
        f"Parquet: to_parquet_bytes, {sum(t.num_rows for t in file_tables)} rows":
            lambda: to_parquet_bytes(file_tables, FACTS, "zstd"),
        f"zstd: Arrow codec, {data.size / 1e6:.1f} MB of frames": lambda: zstd.compress(data),
        "_table": table,
    }


def schedstat() -> tuple[int, int]:
    """(ns on a core, ns waiting runnable for one) of the calling thread."""
    with open("/proc/thread-self/schedstat") as f:
        ran, waited, _ = map(int, f.read().split())
    return ran, waited


def run_threads(fn, threads: int, n: int) -> tuple[float, float, float]:
    """(wall s, process CPU s, runnable s summed over the threads) of ``threads`` threads
    each calling ``fn`` ``n`` times."""
    start = threading.Barrier(threads + 1)
    runnable = []

    def work():
        start.wait()
        ran, waited = schedstat()
        for _ in range(n):
            fn()
        ran_end, waited_end = schedstat()
        runnable.append((ran_end - ran + waited_end - waited) / 1e9)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    c0, w0 = time.process_time(), time.perf_counter()
    for t in pool:
        t.join()
    return time.perf_counter() - w0, time.process_time() - c0, sum(runnable)


def measure(fn, rounds: int, seconds: float) -> dict:
    fn()  # warm caches
    _, one_cpu, _ = run_threads(fn, 1, 3)
    n = max(1, math.ceil(seconds / max(one_cpu / 3, 1e-6)))  # CPU, not wall: load varies
    speedups, utils, utils1, cpu1, cpu2, run1, run2 = [], [], [], [], [], [], []
    for r in range(rounds):
        order = (1, 2) if r % 2 == 0 else (2, 1)
        got = {k: run_threads(fn, k, n) for k in order}
        (w1, c1, r1), (w2, c2, r2) = got[1], got[2]
        run1.append(r1 / w1)
        run2.append(r2 / w2)
        speedups.append((2 * n / w2) / (n / w1))
        utils.append(c2 / w2)
        utils1.append(c1 / w1)
        cpu1.append(c1 / n * 1000)
        cpu2.append(c2 / (2 * n) * 1000)
    return {"n": n, "speedup": median(speedups), "speedup_min": min(speedups),
            "speedup_max": max(speedups), "util": median(utils), "util1": median(utils1),
            "runnable1": median(run1), "runnable2": median(run2),
            "runnable2_min": min(run2), "runnable2_max": max(run2),
            "cpu_ms_1": median(cpu1), "cpu_ms_2": median(cpu2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.4, help="per thread per run")
    parser.add_argument("--bad-share", type=float, default=0.002)
    parser.add_argument("--steps", default="", help="substrings of step names, comma-separated")
    parser.add_argument("--switch-interval-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    sys.setswitchinterval(args.switch_interval_s)
    data = batches(5, args.bad_share)
    steps = prepare(data[0], data[1:])
    table = steps.pop("_table")
    wanted = [s for s in args.steps.split(",") if s]
    print(f"unit: one batch of {len(data[0].values)} {data[0].event_type.output} records "
          f"({data[0].nbytes / 1e6:.2f} MB of frames, {table.num_rows} good rows); "
          f"load average before: {loadavg()}")
    print(f"{'step':55} {'runnable 1':>10} {'runnable 2':>10} {'(min-max)':>11} "
          f"{'speedup':>8} {'(min-max)':>11} {'util 1':>6} {'util 2':>6} {'CPU ms 1':>9} "
          f"{'CPU ms 2':>9} {'n':>4}")
    for name, fn in steps.items():
        if wanted and not any(w in name for w in wanted):
            continue
        m = measure(fn, args.rounds, args.seconds)
        print(f"{name:55} {m['runnable1']:10.2f} {m['runnable2']:10.2f} "
              f"{m['runnable2_min']:5.2f}-{m['runnable2_max']:<5.2f} {m['speedup']:8.2f} {m['speedup_min']:5.2f}-{m['speedup_max']:<5.2f} "
              f"{m['util1']:6.2f} {m['util']:6.2f} {m['cpu_ms_1']:9.2f} {m['cpu_ms_2']:9.2f} {m['n']:4}", flush=True)
    print(f"medians of {args.rounds} rounds; load average after: {loadavg()}")


if __name__ == "__main__":
    main()
