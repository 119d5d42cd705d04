"""Where one instance's GIL-held time goes, against the native floor, per category.

``python tests/bench/profile_instance.py [--events 200000] [--rate 250] [--parallelism N]
[--partitions 4] [--per-partition-floor] [--workdir DIR]``

Produces ``--events`` records as ``bench_pipeline.py`` does (0.2 % bad), then runs the
native floor and one ``garmexport run`` (5 s file age, so the tail is short) in turn, as the
benchmark runs them, each sampled by ``py-spy record --gil --pid`` (raw collapsed stacks):
only samples of the thread holding the GIL count, which is the work threads cannot spread
over cores, and which leaves out the waits (a poll, an fsync: they release the GIL) that
py-spy's idle filter counts as active. Native work that releases the GIL (most of Arrow,
ptars, Parquet, zstd) is not in it. Each sample goes to the category of the innermost frame
that names one (``CATEGORIES``), so a Parquet call made by a writer counts as Parquet, the
writer's own lines as writer bookkeeping. Prints seconds per 1M events per category for
both runs and the difference. Samples are wall time: on a loaded machine a thread holding
the GIL while waiting for a core counts too, so compare the two runs, made back to back.
Needs py-spy (``pip install py-spy``; a tool, not a dependency of the project).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_pipeline as bp  # tests/bench, the script's directory
import procstats

#: (category, substrings of a py-spy frame "function (file:line)"), first match wins
CATEGORIES = [
    ("upb check", ("upb_check.py",)),
    ("decode: ptars, Arrow, numpy", ("columns.py", "frame_arrays.py", "columns_reference.py")),
    ("Parquet encode", ("parquet_io.py", "pyarrow/parquet")),
    ("publish: intent, write, link, fsync", ("publisher.py", "storage/", "quarantine.py")),
    ("routing by frame head", ("router.py", "frames.py")),
    ("writer bookkeeping", ("origin_writer.py", "open_files.py", "held_rows.py",
                            "writer_actor.py", "writer_work.py", "writer_order.py", "resume.py")),
    ("reader bookkeeping, markers", ("coordinator.py", "reader_actor.py", "reader_state.py",
                                     "reader_gauges.py", "flusher.py", "store_watch.py",
                                     "ledger.py", "marker_", "flush.py", "recovery.py")),
    ("metrics", ("metrics.py", "prometheus_client")),
    ("Kafka: consume, one object per record", ("kafka/source.py", "confluent_kafka")),
    ("actors, messages (thespian)", ("thespian", "escalation.py", "messages.py")),
    ("floor's own loop", ("plain_pipeline.py", "native_floor.py")),
]


def category(stack: str) -> str:
    """The category of the innermost frame of ``stack`` that names one."""
    for frame in reversed(stack.split(";")):
        for name, parts in CATEGORIES:
            if any(p in frame for p in parts):
                return name
    return "other"


def profile(path: Path, events: int, rate: int) -> dict[str, float]:
    """Sampled seconds per 1M events per category, from a raw py-spy file."""
    counts: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack:
            counts[category(stack)] += int(n)
    return {k: v / rate * 1e6 / events for k, v in counts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--parallelism", type=int, default=0,
                        help="the exporter's actors.parallelism (0: its default, the usable "
                        "CPUs); the readers are sampled with the supervisor")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-partition-floor", action="store_true",
                        help="the floor writes a file per (type, partition, day), the files "
                        "garmexport's shape requires (bench_pipeline's floor_pp)")
    parser.add_argument("--workdir", help="keep logs and profiles here (default: temp dir)")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy")
    if spy is None:
        sys.exit("py-spy is not installed (pip install py-spy)")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="profile-instance-"))
    work.mkdir(parents=True, exist_ok=True)
    spies: list[tuple[subprocess.Popen, Path]] = []

    def spawn_sampled(command, log_path, env=None, cwd=None):
        proc = procstats.spawn(command, log_path, env=env, cwd=cwd)
        out = Path(log_path).with_suffix(".pyspy.txt")
        spies.append((subprocess.Popen(
            # --subprocesses: with parallelism above 1 the work is in the reader processes
            [spy, "record", "--pid", str(proc.pid), "--subprocesses", "--gil", "--format",
             "raw", "--rate",
             str(args.rate), "--nonblocking", "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out))
        return proc

    bp.spawn = spawn_sampled  # both runs below start their process through it
    broker = None
    try:
        broker = bp.start_with_topic(work, "garmadon", args.partitions)
        produced = bp.produce_events(broker.bootstrap, "garmadon", args.events,
                                     args.partitions, 3, bad_share=0.002)
        n = produced["total"]
        common = ["--bootstrap", broker.bootstrap, "--topic", "garmadon", "--events", str(n)]
        raw = {"floor": bp.run_program("floor", "native_floor.py",
                                       [*common, "--group", "p-floor", "--out",
                                        str(work / "out-floor"),
                                        *(["--per-partition"] if args.per_partition_floor
                                          else [])], work)}
        env = bp.exporter_env(broker.bootstrap, "garmadon", "p-exporter", work / "out-exporter",
                              GARMEXPORT_WRITER_MAX_FILE_AGE_S="5",
                              GARMEXPORT_ACTORS_PARALLELISM=str(args.parallelism))
        raw["garmexport"] = bp.run_exporters("garmexport", 1, env, n, args.partitions, work,
                                             work / "out-exporter")
    finally:
        if broker is not None:
            broker.stop()
    profiles = {}
    for name, (proc, out) in zip(raw, spies):
        proc.wait(timeout=60)
        profiles[name] = profile(out, n, args.rate)
    print(f"\n{n} events; py-spy samples holding the GIL, seconds per 1M events (whole "
          "process life: start-up and shutdown included)")
    print(f"{'category':40} {'floor':>7} {'garmexport':>11} {'difference':>11}")
    names = sorted(set(profiles["floor"]) | set(profiles["garmexport"]),
                   key=lambda k: -profiles["garmexport"].get(k, 0))
    for k in [*names, "total"]:
        f, g = (sum(p.values()) if k == "total" else p.get(k, 0.0)
                for p in (profiles["floor"], profiles["garmexport"]))
        print(f"{k:40} {f:7.2f} {g:11.2f} {g - f:+11.2f}")
    for name, r in raw.items():
        print(f"{name}: steady CPU of the process {r['steady_cpu_s'] * 1e6 / n:.2f} s per 1M "
              f"events, whole run {r['cpu_s'] * 1e6 / n:.2f} (sampled), files {r['files']}")
    print(f"raw profiles in {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
