"""What an instance costs when there is little or nothing to do: idle with its writers open,
and fed at a steady rate, against its catch-up cost per event (issue 42).

``python tests/bench/bench_idle.py [--idle-partitions 128] [--idle-s 60] [--per-writer 20]
[--steady-partitions 16,128] [--rates 500,2000,20000] [--steady-s 60] [--warmup-s 15]
[--catchup-events 200000] [--repeat 1] [--exporter-env KEY=VALUE] [--variant-env KEY=VALUE]
[--json-out F]``

A quick run (about 2 min): ``--idle-s 20 --steady-partitions 16 --rates 2000 --steady-s 20
--catchup-events 50000``.

Everything runs against the embedded broker, one ``garmexport run`` at a time with its
defaults (2 reader processes on 2 CPUs), each on a topic of its own:

1. ``idle``: a topic of ``--idle-partitions``; once the instance is assigned, a burst of
   ``--per-writer`` records per (exported type, partition) on average (every exported type
   equally likely, one day of event time, nothing late or bad), so every writer has an
   open file; once /metrics shows the burst consumed and the writers are done with it (the
   first ``--settle-s`` slice with the instance below ``--settle-cores``; the time and CPU
   that took are reported as ``after_burst``), nothing is fed and nothing reads /metrics for ``--idle-s``: the CPU
   seconds of the instance's process tree (supervisor and readers, from /proc) over that
   window are the idle cost, reported per minute and as cores. The file age is raised
   (``--idle-file-age-s``, above the window) so the files stay open throughout; the open
   files are read from /metrics after the window.
2. ``catchup``, per ``--steady-partitions`` count: ``--catchup-events`` records produced
   first (bench_pipeline's workload: default mix, 3 days, 5 % late, 0.2 % bad), then the
   instance reads them (5 s file age): its CPU per event from the first record to all
   consumed (:func:`catchup`).
3. ``steady``, per partition count and ``--rates`` rate: the instance is started on an empty
   topic, assigned, then ``garmexport produce --rate R`` feeds it (default mix, one day,
   round robin) in a process of its own; after ``--warmup-s`` (every writer has opened its
   file by then) the instance's CPU over ``--steady-s`` is taken, and the records produced
   in the window from the topic's high watermarks (read by the bench, not the instance).
   Cores = CPU s / window s; CPU per event = CPU s / records produced in the window. After
   the window one read of /metrics gives the records consumed (``unconsumed_after``: how
   far behind the instance fell; one that falls behind is above the rate it sustains, so
   its CPU per event is a catch-up figure).

``--variant-env`` (repeatable) pairs every run with one of the same settings plus that
environment (named ``... +variant``), run right after it, so a change is measured against
its baseline in the same invocation; ``--exporter-env`` applies to both.

The machine is shared: each window also reports the load, the CPU of the whole machine
(/proc/stat) minus the instance's, the producer's and the broker's, as ``others_cores``.
Medians over ``--repeat``. Writes JSON; exits 0 whatever the numbers.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_pipeline as bp  # noqa: E402 - tests/bench, the script's directory
from procstats import cpu_now, kill_tree, spawn, tree_pids  # noqa: E402

_TICKS = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all CPUs, /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / _TICKS


class Window:
    """CPU of named process trees and of the machine between :meth:`start` and :meth:`stop`."""

    def __init__(self, **roots: int) -> None:
        self.roots = roots

    def _now(self) -> dict[str, float]:
        return {name: cpu_now(pid) for name, pid in self.roots.items()}

    def start(self) -> None:
        self.t0, self.cpu0, self.busy0 = time.monotonic(), self._now(), machine_busy_s()

    def stop(self) -> dict:
        cpu1, busy1, t1 = self._now(), machine_busy_s(), time.monotonic()
        wall = t1 - self.t0
        cpu = {name: cpu1[name] - self.cpu0[name] for name in cpu1}
        others = (busy1 - self.busy0) - sum(cpu.values())
        return {"window_s": round(wall, 2),
                **{f"{name}_cpu_s": round(v, 3) for name, v in cpu.items()},
                **{f"{name}_cores": round(v / wall, 4) for name, v in cpu.items()},
                "others_cores": round(max(others, 0.0) / wall, 3),
                "loadavg_1m": round(os.getloadavg()[0], 2)}


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    """Sum of the topic's high watermarks (records produced so far)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-idle-watermarks",
                         "enable.auto.commit": False})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def wait_for(what: str, ready, timeout_s: float, proc=None, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} waiting for {what}; see {log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} in {timeout_s} s; see {log}")
        time.sleep(0.5)


def start_instance(env: dict[str, str], log: Path):
    """``garmexport run`` started and assigned; (process, metrics port)."""
    proc = bp.start_exporter(env, log)
    wait_for("assignment", lambda: bp.log_events(log, "assigned"), 120, proc, log)
    wait_for("metrics port", lambda: bp.metrics_port(log), 30, proc, log)
    return proc, bp.metrics_port(log)


def open_files(port: int) -> float:
    """``garmexport_open_files`` summed over the series /metrics shows."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("garmexport_open_files"))


def idle(args, work: Path, extra: dict[str, str], attempt: str) -> dict:
    from garmexport.cli.produce import produce
    from garmexport.kafka.producer import PRODUCER_SETTINGS
    from garmexport.testbed.generator import Spec
    from garmexport.wire.events import REGISTRY

    topic, partitions = f"idle{attempt}", args.idle_partitions
    broker = bp.start_with_topic(work / f"broker-{topic}", topic, partitions)
    proc = None
    try:
        exported = sorted(t.name for t in REGISTRY.values() if t.output is not None)
        env = bp.exporter_env(broker.bootstrap, topic, topic, work / f"out-{topic}",
                              GARMEXPORT_WRITER_MAX_FILE_AGE_S=str(args.idle_file_age_s),
                              **extra)
        log = work / f"{topic}.log"
        proc, port = start_instance(env, log)
        burst = partitions * len(exported) * args.per_writer
        spec = Spec(now_ms=int(time.time() * 1000), partitions=partitions, days=1,
                    late_share=0.0, bad_share=0.0, mix={name: 1.0 for name in exported})
        produce({"bootstrap.servers": broker.bootstrap, **PRODUCER_SETTINGS}, topic, spec, burst)
        wait_for("burst consumed",
                 lambda: sum(bp.scrape(port)[0].values()) >= burst, 300, proc, log)
        # the writers still work through the burst after it is consumed: wait until a
        # --settle-s slice of the instance's CPU is below --settle-cores (or --settle-max-s)
        settle = Window(instance=proc.pid)
        settle.start()
        deadline = time.monotonic() + args.settle_max_s
        while time.monotonic() < deadline:
            piece = Window(instance=proc.pid)
            piece.start()
            time.sleep(args.settle_s)
            if piece.stop()["instance_cores"] < args.settle_cores:
                break
        after_burst = settle.stop()
        window = Window(instance=proc.pid)
        window.start()
        time.sleep(args.idle_s)
        row = window.stop()
        per_process = {str(pid): round(cpu_now(pid), 2) for pid in tree_pids(proc.pid)}
        row.update({"after_burst_s": after_burst["window_s"],
                    "after_burst_cpu_s": after_burst["instance_cpu_s"],
                    "partitions": partitions, "types": len(exported), "burst": burst,
                    "open_files_after": open_files(port),
                    "instance_cpu_s_per_min": round(row["instance_cpu_s"] * 60
                                                    / row["window_s"], 3),
                    "processes": len(per_process)})
        return row
    finally:
        if proc is not None:
            kill_tree(proc, grace_s=30.0)
        broker.stop()


def catchup(args, work: Path, partitions: int, extra: dict[str, str], attempt: str) -> dict:
    """CPU per event reading a backlog: from the first record (the instance logs its CPU
    then) to all records consumed (/metrics read every second; at this count a read costs
    milliseconds). Not to all published: that tail waits for the file age, and at a few
    hundred thousand events the idle CPU of that wait would be most of the figure."""
    topic = f"catchup{partitions}-{attempt}"
    broker = bp.start_with_topic(work / f"broker-{topic}", topic, partitions)
    proc = None
    try:
        produced = bp.produce_events(broker.bootstrap, topic, args.catchup_events, partitions,
                                     3, bad_share=0.002)
        n = produced["total"]
        env = bp.exporter_env(broker.bootstrap, topic, topic, work / f"out-{topic}",
                              GARMEXPORT_WRITER_MAX_FILE_AGE_S="5", **extra)
        log = work / f"{topic}.log"
        proc = bp.start_exporter(env, log)
        wait_for("metrics port", lambda: bp.metrics_port(log), 120, proc, log)
        port = bp.metrics_port(log)
        wait_for("all consumed", lambda: sum(bp.scrape(port)[0].values()) >= n, 600, proc, log)
        done_s, done_cpu = time.time(), cpu_now(proc.pid)
        # as bench_pipeline: each reader logs its CPU at its first record
        firsts = bp.log_events(log, "first_record")
        cpu = done_cpu - sum(float(r["process_cpu_s"]) for r in firsts)
        return {"partitions": partitions, "events": n,
                "cpu_us_per_event": round(cpu / n * 1e6, 2),
                "events_per_s": round(n / (done_s - min(map(bp.log_wall_s, firsts))))}
    finally:
        if proc is not None:
            kill_tree(proc, grace_s=30.0)
        broker.stop()


def steady(args, work: Path, partitions: int, rate: int, extra: dict[str, str],
           attempt: str) -> dict:
    topic = f"steady{partitions}-{rate}-{attempt}"
    broker = bp.start_with_topic(work / f"broker-{topic}", topic, partitions)
    proc = producer = None
    try:
        env = bp.exporter_env(broker.bootstrap, topic, topic, work / f"out-{topic}", **extra)
        log = work / f"{topic}.log"
        proc, port = start_instance(env, log)
        duration = args.warmup_s + args.steady_s + 10
        producer = spawn([sys.executable, "-m", "garmexport", "produce", "--bootstrap",
                          broker.bootstrap, "--topic", topic, "--partitions", str(partitions),
                          "--rate", str(rate), "--duration", str(duration), "--days", "1",
                          "--progress-s", "0"], str(work / f"{topic}-produce.log"),
                         env=env, cwd=str(bp.ROOT))
        time.sleep(args.warmup_s)
        window = Window(instance=proc.pid, producer=producer.pid,
                        broker=broker.process.pid)
        before = high_watermarks(broker.bootstrap, topic, partitions)
        window.start()
        time.sleep(args.steady_s)
        row = window.stop()
        events = high_watermarks(broker.bootstrap, topic, partitions) - before
        consumed, _lag = bp.scrape(port)
        produced = high_watermarks(broker.bootstrap, topic, partitions)
        row.update({"partitions": partitions, "rate": rate, "events": events,
                    "events_per_s": round(events / row["window_s"]),
                    "cpu_us_per_event": (round(row["instance_cpu_s"] / events * 1e6, 1)
                                         if events else None),
                    "unconsumed_after": produced - int(sum(consumed.values()))})
        return row
    finally:
        for p in (producer, proc):
            if p is not None:
                kill_tree(p, grace_s=30.0)
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-partitions", type=int, default=128, help="0: no idle run")
    parser.add_argument("--idle-s", type=float, default=60.0)
    parser.add_argument("--idle-file-age-s", type=float, default=3600.0)
    parser.add_argument("--per-writer", type=int, default=20,
                        help="burst records per (type, partition), on average")
    parser.add_argument("--settle-s", type=float, default=5.0,
                        help="after the burst is consumed, the window starts after the first "
                        "slice of this many seconds with the instance below --settle-cores")
    parser.add_argument("--settle-cores", type=float, default=0.1)
    parser.add_argument("--settle-max-s", type=float, default=180.0)
    parser.add_argument("--steady-partitions", default="16,128", help="'': no steady runs")
    parser.add_argument("--rates", default="500,2000,20000")
    parser.add_argument("--steady-s", type=float, default=60.0)
    parser.add_argument("--warmup-s", type=float, default=15.0)
    parser.add_argument("--catchup-events", type=int, default=200_000, help="0: no catch-up")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; medians reported")
    parser.add_argument("--exporter-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--variant-env", action="append", default=[], metavar="KEY=VALUE",
                        help="also run everything with this GARMEXPORT_* override, paired")
    parser.add_argument("--json-out", default="bench-results/idle.json")
    parser.add_argument("--workdir", help="keep logs here (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    extra = dict(kv.split("=", 1) for kv in args.exporter_env)
    variants = {"": extra}
    if args.variant_env:
        variants[" +variant"] = {**extra, **dict(kv.split("=", 1) for kv in args.variant_env)}
    counts = [int(p) for p in args.steady_partitions.split(",") if p]
    rates = [int(r) for r in args.rates.split(",") if r]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-idle-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {}
    try:
        for attempt in range(args.repeat):
            for tag, env in variants.items():
                if args.idle_partitions:
                    print(f"run {attempt + 1}/{args.repeat}: idle{tag}", flush=True)
                    runs.setdefault(f"idle{tag}", []).append(
                        idle(args, work, env, f"{attempt}{tag.strip(' +')}"))
            for partitions in counts:
                for tag, env in variants.items():
                    if args.catchup_events:
                        print(f"run {attempt + 1}/{args.repeat}: catch-up {partitions}{tag}",
                              flush=True)
                        runs.setdefault(f"catchup {partitions}{tag}", []).append(
                            catchup(args, work, partitions, env, f"{attempt}{tag.strip(' +')}"))
                for rate in rates:
                    for tag, env in variants.items():
                        print(f"run {attempt + 1}/{args.repeat}: steady {partitions} x "
                              f"{rate}/s{tag}", flush=True)
                        runs.setdefault(f"steady {partitions} {rate}{tag}", []).append(
                            steady(args, work, partitions, rate, env,
                                   f"{attempt}{tag.strip(' +')}"))
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    rows = {name: bp.median_row(values) for name, values in runs.items()}
    print(f"\nmedians of {args.repeat}; {os.cpu_count()} CPUs")
    for name, r in rows.items():
        if not name.startswith("idle"):
            continue
        print(f"{name}: {r['partitions']} partitions x {r['types']} types, "
              f"{r['open_files_after']:.0f} files open: {r['instance_cpu_s_per_min']} CPU-s "
              f"per minute = {r['instance_cores']} cores over {r['window_s']} s "
              f"({r['processes']} processes; others on the machine {r['others_cores']} "
              f"cores, load {r['loadavg_1m']}); before it, the writers' work on the burst "
              f"took {r['after_burst_s']} s and {r['after_burst_cpu_s']} CPU-s after it was "
              "consumed")
    print(f"{'parts':>5} {'rate/s':>7}   {'got/s':>7} {'cores':>7} {'us/ev':>7} {'catchup':>8} "
          f"{'x catch':>7} {'behind':>7} {'prod c':>6} {'brok c':>6} {'others':>6} {'load':>5}")
    for name, r in rows.items():
        if not name.startswith("steady"):
            continue
        tag = " +variant" if name.endswith(" +variant") else ""
        up = rows.get(f"catchup {r['partitions']}{tag}", {}).get("cpu_us_per_event")
        x = round(r["cpu_us_per_event"] / up, 1) if up and r["cpu_us_per_event"] else None
        print(f"{r['partitions']:>5} {r['rate']:>7}{'+v' if tag else '  '} {r['events_per_s']:>7} "
              f"{r['instance_cores']:>7} {r['cpu_us_per_event'] or '-':>7} {up or '-':>8} "
              f"{x or '-':>7} {r['unconsumed_after']:>7} {r['producer_cores']:>6} "
              f"{r['broker_cores']:>6} {r['others_cores']:>6} {r['loadavg_1m']:>5}")
    print("cores: the instance's CPU s over the window; us/ev: per record produced in the "
          "window; catchup: the instance's steady CPU per event reading a backlog at that "
          "partition count; behind: records produced but not consumed after the window "
          "(/metrics); "
          "prod c, brok c: the producer's and the broker's cores; others: the rest of the "
          "machine")
    targets = []
    for tag in variants:
        if f"idle{tag}" in rows:
            r = rows[f"idle{tag}"]
            targets.append((f"idle{tag} with {r['partitions']} partitions' writers open "
                            "< 0.05 cores", r["instance_cores"] < 0.05, r["instance_cores"]))
        if f"steady 16 2000{tag}" in rows:
            r = rows[f"steady 16 2000{tag}"]
            targets.append((f"steady{tag} 2,000 events/s over 16 partitions < 0.1 cores",
                            r["instance_cores"] < 0.1, r["instance_cores"]))
    print("\ntargets (issue 42):")
    for title, ok, value in targets:
        print(f"  {'held' if ok else 'NOT held':12} {title}: {value}")
    out = Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "cpus": os.cpu_count(), "rows": rows,
                               "all_runs": runs,
                               "targets": [{"target": t, "held": ok, "value": v}
                                           for t, ok, v in targets]}, indent=2))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
