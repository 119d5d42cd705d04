"""Memory of the exporter: bounded by configuration, not by open writers or by the backlog.

``python tests/bench/bench_memory.py [--events 1000000] [--writer-events 40000]``

1. Many open writers: a 32-partition topic with events of every exported type (uniform mix)
   over 3 days, so 18 x 32 x 3 = 1728 files are open at once when ``max_file_age_s`` is an
   hour and the idle flush is off; the buffered-bytes budget is ``--budget-mib`` (64). The
   default 40k events put about 23 rows in each chain, within the budget: more would
   make the budget publish files early, and fewer would stay open at once. Peak RSS of the
   process tree until every record is consumed plus a few seconds, against baseline +
   budget, where the baseline is the exporter's fixed footprint: the same settings, after
   it exported a few events of every type in every partition with nothing left open
   (``max_file_rows`` 1). The first decode of each type and the first Parquet file load
   about 17 MiB of code and tables once, whatever the data; an exporter that never
   decoded anything (also printed, "cold idle") does not show them.
2. Catch-up: ``garmexport run`` with its defaults over a backlog of N / 2, N and 2 N events
   (default mix, 4 partitions, 3 days), until all is published. Peak RSS must not grow with
   the backlog: target peak(2 N) <= 1.25 x peak(N / 2), and for N = 1M peak <= 600 MB.
   The smallest backlog already fills the 128 MiB byte budget (decoded, 500k events are
   more than that); a smaller one would measure the budget filling up, not the backlog.

Prints the numbers and whether each target holds; writes JSON; exits 0 regardless.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import (MB, exporter_env, metrics_port, produce_events,  # noqa: E402
                            run_exporters, start_exporter, start_with_topic)
from procstats import TreeSampler, kill_tree  # noqa: E402

from garmexport.wire.events import EXPORTED  # noqa: E402

MiB = 1024 * 1024
UNIFORM = {t.name: 1.0 for t in EXPORTED}
WARM_EVENTS = 4 * 32 * len(EXPORTED)  # ~4 per (type, partition): nearly every writer warm


def gauges(port: int) -> dict[str, float]:
    """Unlabelled-or-summed garmexport_* samples of /metrics, by metric name."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"(garmexport_\w+)(?:\{.*\})? (\S+)$", line)
        if m:
            values[m.group(1)] = values.get(m.group(1), 0.0) + float(m.group(2))
    return values


def watch(env: dict[str, str], log: Path, done, settle_s: float, timeout_s: float = 600.0):
    """Run one exporter until ``done(gauges)`` holds, then ``settle_s`` more seconds.
    Returns (peak RSS bytes, the last gauges, max open files seen, max buffered bytes seen)."""
    proc = start_exporter(env, log)
    try:
        with TreeSampler(proc.pid) as sampler:
            deadline, port, values = time.monotonic() + timeout_s, None, {}
            open_max = buffered_max = 0.0
            settled_at = None  # keep scraping while settling: writers report after consumption
            while settled_at is None or time.monotonic() < settled_at:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not done within {timeout_s} s; see {log}")
                if proc.poll() is not None:
                    raise RuntimeError(f"the exporter exited with {proc.returncode}; see {log}")
                port = port or metrics_port(log)
                if port:
                    values = gauges(port)
                    open_max = max(open_max, values.get("garmexport_open_files", 0.0))
                    buffered_max = max(buffered_max, values.get("garmexport_buffered_bytes", 0.0))
                    if settled_at is None and done(values):
                        settled_at = time.monotonic() + settle_s
                time.sleep(0.25)
            usage = sampler.stop()
    finally:
        kill_tree(proc, grace_s=30.0)
    return usage.peak_rss_bytes, values, open_max, buffered_max


def open_writers(work: Path, bootstrap: str, events: int, budget_mib: int) -> dict:
    extra = {"GARMEXPORT_WRITER_MAX_FILE_AGE_S": "3600",
             "GARMEXPORT_WRITER_MAX_BUFFERED_BYTES": str(budget_mib * MiB),
             "GARMEXPORT_PROTOCOL_HEARTBEAT_INTERVAL_S": "3600",
             # only the budget may publish: every chain stays open until the end
             "GARMEXPORT_WRITER_IDLE_FLUSH_S": "0"}
    new_topic(bootstrap, "idle", 32)
    env = exporter_env(bootstrap, "idle", "mem-idle", work / "out-idle", **extra)
    cold, _, _, _ = watch(env, work / "idle.log",
                          lambda v: v.get("garmexport_assigned_partitions", 0) >= 32, 5.0)
    # the fixed footprint: every type decoded and published in every partition, nothing
    # left open (each file is published at its first row)
    new_topic(bootstrap, "warm", 32)
    warm_events = produce_events(bootstrap, "warm", WARM_EVENTS, 32, 3, mix=UNIFORM)["total"]
    env = exporter_env(bootstrap, "warm", "mem-warm", work / "out-warm",
                       **extra, GARMEXPORT_WRITER_MAX_FILE_ROWS="1")
    baseline, _, _, _ = watch(
        env, work / "warm.log",
        lambda v: v.get("garmexport_events_consumed_total", 0) >= warm_events, 5.0)
    new_topic(bootstrap, "wide", 32)
    produce_events(bootstrap, "wide", events, 32, 3, mix=UNIFORM)
    env = exporter_env(bootstrap, "wide", "mem-wide", work / "out-wide", **extra)
    peak, values, open_max, buffered_max = watch(
        env, work / "wide.log", lambda v: v.get("garmexport_events_consumed_total", 0) >= events, 5.0)
    bound = baseline + budget_mib * MiB
    return {"events": events, "budget_bytes": budget_mib * MiB, "cold_idle_rss_bytes": cold,
            "baseline_rss_bytes": baseline, "peak_rss_bytes": peak, "bound_bytes": bound,
            "max_open_files": open_max, "max_buffered_bytes": buffered_max,
            "held": peak <= bound}


def new_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from garmexport.kafka.topics import create_topic

    create_topic(bootstrap, topic, partitions)


def catch_up(work: Path, bootstrap: str, events: int) -> dict:
    topic = f"backlog{events}"
    new_topic(bootstrap, topic, 4)
    produced = produce_events(bootstrap, topic, events, 4, 3)
    out = work / f"out-{topic}"
    env = exporter_env(bootstrap, topic, f"mem-{topic}", out)
    raw = run_exporters(f"catchup-{events}", 1, env, produced["total"], 4, work, out)
    shutil.rmtree(out, ignore_errors=True)
    return {"events": events, "peak_rss_bytes": raw["peak_rss"],
            "seconds": round(raw["done_s"] - raw["started_s"], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="the large backlog")
    parser.add_argument("--writer-events", type=int, default=40_000,
                        help="events for the many-writers part (32 partitions, every type)")
    parser.add_argument("--budget-mib", type=int, default=64)
    parser.add_argument("--json-out", default="bench-results/memory.json")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    broker = None
    try:
        broker = start_with_topic(work, "unused", 1)
        wide = open_writers(work, broker.bootstrap, args.writer_events, args.budget_mib)
        print(f"many open writers ({wide['events']} events, 32 partitions x 18 types x 3 days): "
              f"max {wide['max_open_files']:.0f} open files, max buffered "
              f"{wide['max_buffered_bytes'] / MiB:.1f} MiB; peak RSS "
              f"{wide['peak_rss_bytes'] / MiB:.0f} MiB vs fixed footprint "
              f"{wide['baseline_rss_bytes'] / MiB:.0f} MiB (cold idle "
              f"{wide['cold_idle_rss_bytes'] / MiB:.0f} MiB) + budget {args.budget_mib} MiB = "
              f"{wide['bound_bytes'] / MiB:.0f} MiB -> {'held' if wide['held'] else 'NOT held'}",
              flush=True)
        small = catch_up(work, broker.bootstrap, args.events // 2)
        large = catch_up(work, broker.bootstrap, args.events)
        larger = catch_up(work, broker.bootstrap, args.events * 2)
        growth = larger["peak_rss_bytes"] / small["peak_rss_bytes"]
        print("catch-up with defaults: " + "; ".join(
            f"{r['events']} events -> peak {r['peak_rss_bytes'] / MB:.0f} MB ({r['seconds']} s)"
            for r in (small, large, larger))
            + f"; {growth:.2f}x for {larger['events'] / small['events']:.0f}x the backlog -> "
            f"{'held' if growth <= 1.25 else 'NOT held'} (target <= 1.25x)")
        rss_ok = large["peak_rss_bytes"] <= 600 * MB
        print(f"peak RSS of the {large['events']}-event catch-up <= 600 MB: "
              f"{'held' if rss_ok else 'NOT held'}")
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"open_writers": wide, "catch_up": [small, large, larger],
                                   "growth": round(growth, 3), "growth_held": growth <= 1.25,
                                   "rss_600mb_held": rss_ok}, indent=2))
        print(f"wrote {out}")
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    main()
    raise SystemExit(0)
