"""Restart cost against output history: time from ``garmexport run`` start to first publish.

``python tests/bench/bench_restart.py [--history 1,30,365] [--repeat 3] [--events 20000]``

The exporter never reads day directories at start-up, so a restart over a year of history
should cost what a restart over a day costs. For each history size D, an output root is built
as a long-running exporter would have left it: for every exported type and partition one data
file per day for D days before the workload (named, and with footers, as the exporter writes
them) and ``marker_keep`` markers per partition saying everything up to the middle of the
topic is published. ``garmexport run`` then resumes from the markers; the time from its
process start to the first new data file in the output dir (polled every 50 ms, only in the
day directories the new events go to) is measured, and to its ``assigned`` log event (start-up
plus group join). ``max_file_age_s`` is 2 s so the first file is due soon after the first
records; the default minute would only add a constant. Medians over ``--repeat`` runs.
Target: the median for 365 days within 1.2x of the median for 1 day. Exits 0 regardless.

``--jvm-days 730 [--jvm-latency-ms 0,2] [--partitions 8]`` measures instead the takeover of
a root the Garmadon JVM exporter wrote (docs/jvm-takeover.md): one
small ``<p>.index=1`` file per (type, partition, day) for that many days (18 types), read
as the first start reads it (every type directory and day directory listed, the newest
footer of each (type, partition, day) read, on 8 threads), then as every later start
does once markers exist (markers, plus the few listings of the JVM takeover check). On
the local file system, and through the WebHDFS test double (``tests/webhdfs_server.py``)
with each request held the given milliseconds (a NameNode round trip).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import (exporter_env, log_events, log_wall_s, produce_events,  # noqa: E402
                            start_exporter, start_with_topic)
from procstats import kill_tree  # noqa: E402

from garmexport.wire.columns import schema_for  # noqa: E402
from garmexport.wire.events import EXPORTED  # noqa: E402
from garmexport.protocol.naming import FileName, MarkerName, data_path, day_name, partition_dir  # noqa: E402
from garmexport.pipeline.parquet_io import FileFacts, to_parquet_bytes  # noqa: E402
from garmexport.protocol.resume import Marker  # noqa: E402

DAY_MS = 86_400_000
SOURCE, TOPIC = "local", "garmadon"
WORKLOAD_DAYS = 1


def build_history(root: Path, days: int, first_day: int, partitions: int, resume_at: int) -> int:
    """Write ``days`` days (ending the day before ``first_day``) of data files and markers
    saying every origin of every partition is published up to ``resume_at - 1``.
    Returns the number of data files written."""
    files = 0
    for event_type in EXPORTED:
        table = schema_for(event_type).empty_table()
        for partition in range(partitions):
            for i in range(days):
                # A day's file covers a slice of offsets below resume_at, older days lower.
                first = i * resume_at // days
                last = max(first, (i + 1) * resume_at // days - 1)
                facts = FileFacts(SOURCE, TOPIC, partition, first, last, 0)
                day = day_name(first_day - days + i)
                path = root / data_path(event_type.output, day, FileName(SOURCE, TOPIC, partition, first))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(to_parquet_bytes([table], facts, "zstd"))
                files += 1
    origins = [t.output for t in EXPORTED] + ["_frame"]
    for partition in range(partitions):
        directory = root / partition_dir(SOURCE, TOPIC, partition)
        directory.mkdir(parents=True, exist_ok=True)
        for counter in (1, 2):  # marker_keep (2) markers, the newer one ahead
            marker = Marker(partition, {o: resume_at - 3 + counter for o in origins}, {},
                            processed=resume_at - 3 + counter, written_at_ms=int(time.time() * 1000))
            (directory / MarkerName("history", counter).format()).write_bytes(marker.to_json())
    return files


def build_jvm_history(root: Path, days: int, partitions: int, last_day: int) -> int:
    """A JVM exporter's root: per (type, partition, day) one ``<p>.index=1`` file of one
    row (``timestamp``, ``kafka_offset``; offsets grow with the day). Returns files written."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import io

    files = 0
    blobs = {}
    for i in range(days):
        for p in range(partitions):
            sink = io.BytesIO()
            pq.write_table(pa.table({"timestamp": pa.array([(last_day - days + i) * DAY_MS], pa.int64()),
                                     "kafka_offset": pa.array([i * 1000 + p], pa.int64())}),
                           sink, compression="gzip")
            blobs[(i, p)] = sink.getvalue()
    for event_type in EXPORTED:
        for i in range(days):
            directory = root / event_type.output / f"day={day_name(last_day - days + i + 1)}"
            directory.mkdir(parents=True, exist_ok=True)
            for p in range(partitions):
                (directory / f"{p}.index=1").write_bytes(blobs[(i, p)])
                files += 1
    return files


def jvm_takeover_cost(storage, partitions: int, count) -> dict[str, float]:
    """Seconds and store requests of a first start (takeover) and of a later one."""
    from garmexport.pipeline.jvm_recovery import JvmScan
    from garmexport.pipeline.jvm_takeover import take_over
    from garmexport.pipeline.recovery import read_partition_state
    from garmexport.pipeline.router import exported_origins

    scan = JvmScan(storage, exported_origins())
    before, t = count(), time.monotonic()
    # what ``offsets set --from-jvm`` and ``run`` (before joining) do
    done = take_over(storage, SOURCE, TOPIC, range(partitions), scan)
    assert all(d.outcome == "written" for d in done), done
    first_s, first_n = time.monotonic() - t, count() - before
    footers = scan.footers_read
    scan = JvmScan(storage, exported_origins())
    before, t = count(), time.monotonic()
    for p in range(partitions):
        rec = read_partition_state(storage, SOURCE, TOPIC, p, scan)
        assert rec.takeover is not None and rec.jvm == {}
    return {"first_start_s": round(first_s, 2), "first_start_requests": first_n,
            "footers_read": footers, "later_start_s": round(time.monotonic() - t, 3),
            "later_start_requests": count() - before, "later_footers_read": scan.footers_read}


def main_jvm(days: int, partitions: int, latencies_ms: list[float], out_json: str) -> int:
    from garmexport.storage.local import LocalStorage

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.webhdfs_server import WebHdfsServer
    from garmexport.storage.options import defaults
    from garmexport.storage.webhdfs import WebHdfsStorage

    work = Path(tempfile.mkdtemp(prefix="bench-jvm-"))
    results = {}
    try:
        t = time.monotonic()
        template = work / "template"
        files = build_jvm_history(template, days, partitions, int(time.time() * 1000) // DAY_MS)
        print(f"JVM root: {days} days x {len(EXPORTED)} types x {partitions} partitions = "
              f"{files} files, built in {time.monotonic() - t:.1f} s", flush=True)
        out = work / "local"
        shutil.copytree(template, out)
        calls = [0]

        class Counting(LocalStorage):
            def list(self, path):  # noqa: ANN001, ANN202
                calls[0] += 1
                return super().list(path)

            def read_tail(self, path, nbytes, size=None):  # noqa: ANN001, ANN202
                calls[0] += 1
                return super().read_tail(path, nbytes, size)

        results["local"] = jvm_takeover_cost(Counting(str(out), "bench"), partitions,
                                             lambda: calls[0])
        print(f"  local: {results['local']}", flush=True)
        shutil.rmtree(out)
        for ms in latencies_ms:
            data = work / f"hdfs-{ms}"
            shutil.copytree(template, data / "out")
            server = WebHdfsServer(str(data)).start()
            server.faults.latency_s = ms / 1000
            try:
                storage = WebHdfsStorage([server.url], "/out", "bench", uri="webhdfs://bench/out",
                                         options=defaults().webhdfs)
                key = f"webhdfs_{ms:g}ms"
                results[key] = jvm_takeover_cost(storage, partitions,
                                                 lambda: len(server.faults.requests))
                storage.close()
                print(f"  {key}: {results[key]}", flush=True)
            finally:
                server.stop()
                shutil.rmtree(data, ignore_errors=True)
        Path(out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(out_json).write_text(json.dumps({"days": days, "partitions": partitions,
                                              "files": files, "results": results}, indent=2))
        print(f"wrote {out_json}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def first_publish(env: dict[str, str], log: Path, watch: list[Path], before: set[str],
                  timeout_s: float = 180.0) -> tuple[float, float | None]:
    """Start the exporter; (seconds to the first new data file, seconds to ``assigned``)."""
    started = time.time()
    proc = start_exporter(env, log)
    try:
        while time.time() - started < timeout_s:
            for directory in watch:
                try:
                    names = os.listdir(directory)
                except FileNotFoundError:
                    continue
                new = [n for n in names if n.endswith(".parquet") and n not in before]
                if new:
                    seen = time.time() - started
                    assigned = log_events(log, "assigned")
                    return seen, (log_wall_s(assigned[0]) - started) if assigned else None
            if proc.poll() is not None:
                raise RuntimeError(f"the exporter exited with {proc.returncode}; see {log}")
            time.sleep(0.05)
        raise RuntimeError(f"no file published within {timeout_s} s; see {log}")
    finally:
        kill_tree(proc, grace_s=30.0)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", default="1,30,365", help="days of history, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--events", type=int, default=20_000, help="records in the topic")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--json-out", default="bench-results/restart.json")
    parser.add_argument("--jvm-days", type=int, default=0,
                        help="measure the takeover of a JVM exporter's root of this many days")
    parser.add_argument("--jvm-latency-ms", default="0,2",
                        help="WebHDFS double latencies (ms per request), comma-separated")
    args = parser.parse_args(argv)
    if args.jvm_days:
        return main_jvm(args.jvm_days, args.partitions,
                        [float(x) for x in args.jvm_latency_ms.split(",") if x],
                        args.json_out.replace("restart.json", "restart-jvm.json"))
    sizes = [int(d) for d in args.history.split(",") if d]
    work = Path(tempfile.mkdtemp(prefix="bench-restart-"))
    broker = None
    results: dict[int, dict] = {}
    try:
        broker = start_with_topic(work, TOPIC, args.partitions)
        now_ms = int(time.time() * 1000)
        produce_events(broker.bootstrap, TOPIC, args.events, args.partitions, WORKLOAD_DAYS,
                       now_ms=now_ms)
        first_day = (now_ms - WORKLOAD_DAYS * DAY_MS) // DAY_MS
        workload_days = [day_name(d) for d in range(first_day - 1, now_ms // DAY_MS + 1)]
        resume_at = args.events // args.partitions // 2
        for days in sizes:
            template = work / f"history-{days}"
            t = time.monotonic()
            files = build_history(template, days, first_day - 1, args.partitions, resume_at)
            print(f"history of {days} days: {files} data files, built in "
                  f"{time.monotonic() - t:.1f} s", flush=True)
            runs, joins = [], []
            for attempt in range(args.repeat):
                out = work / f"out-{days}-{attempt}"
                shutil.copytree(template, out)
                watch = [out / t.output / f"day={d}" for t in EXPORTED for d in workload_days]
                before = {n for w in watch if w.is_dir() for n in os.listdir(w)}
                env = exporter_env(broker.bootstrap, TOPIC, f"restart-{days}-{attempt}", out,
                                   GARMEXPORT_WRITER_MAX_FILE_AGE_S="2")
                seen, assigned = first_publish(env, work / f"run-{days}-{attempt}.log", watch, before)
                runs.append(seen)
                if assigned is not None:
                    joins.append(assigned)
                print(f"  run {attempt + 1}: first file after {seen:.2f} s "
                      f"(assigned after {assigned if assigned is None else round(assigned, 2)} s)",
                      flush=True)
                shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(template, ignore_errors=True)
            results[days] = {"data_files": files, "first_file_s": runs, "assigned_s": joins,
                             "median_first_file_s": round(median(runs), 3),
                             "median_assigned_s": round(median(joins), 3) if joins else None}
        print(f"\n{'history days':>12} {'files':>7} {'to assigned s':>14} {'to first file s':>16}")
        for days, r in results.items():
            print(f"{days:12} {r['data_files']:7} {r['median_assigned_s'] or '-':>14} "
                  f"{r['median_first_file_s']:16.2f}")
        held = None
        if 1 in results and 365 in results:
            ratio = results[365]["median_first_file_s"] / results[1]["median_first_file_s"]
            held = ratio <= 1.2
            print(f"\ntarget 365-day restart within 1.2x of 1-day: {ratio:.2f}x -> "
                  f"{'held' if held else 'NOT held'}")
        out_path = Path(args.json_out)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps({"events": args.events, "repeat": args.repeat,
                                        "history": results, "target_held": held}, indent=2))
        print(f"wrote {out_path}")
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    main()
    raise SystemExit(0)
