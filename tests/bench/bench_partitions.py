"""Cost per event by partition count: the pipeline benchmark at 4, 32 and 128 partitions.

``python tests/bench/bench_partitions.py [--events 1000000] [--partitions 4,32,128]
[--repeat 3] [--runs read,floor,floor_pp,floor_np,garmexport] [--json-out
bench-results/partitions.json]``

For each partition count, :mod:`bench_pipeline` produces the same workload (the default
type mix, 3 days, 5 % late, 0.2 % bad records) to a topic of that many partitions and runs,
``--repeat`` times each, in one invocation: the read limit, the native floor (a file per
(type, day)), the floor with a file per (type, partition, day) (``floor_pp``: the files
garmexport's shape requires, so what the shape costs is told apart from what garmexport
adds), the NP floor (``floor_np``: exactly one file per (type, partition, day), each opened
once with its row groups appended, one process, no protocol: the tight floor of the shape,
issue 42) and ``garmexport run`` with its defaults. Steady-state figures as bench_pipeline
reports them (first record to done; the broker's group join apart), medians.

Prints one table: per partition count and run, events/s, CPU-seconds per 1M events, both
against the native floor of the same count and against the NP floor of the same count, the exporter's CPU per event and events/s
against its own at the first count, files and store calls per 1M events
(``garmexport_store_calls_total``), and peak RSS (the sum over the run's processes); then
issue 31's targets (CPU per event at 32 partitions at most 1.25x the one at 4, at 128 at
most 1.5x; events/s at 32 at least 0.9x the one at 4; peak memory at the largest count
within the configured budget: ``--memory-budget-mb``, the sum of the readers' process
footprints and ``writer.max_buffered_bytes``, 700 MB by default as in
docs/performance.md). Then issue 42's, against the NP floor of the same count and run (CPU per event at
most 1.25x NP's at every count, events/s at least 1.3x NP's at 4 and 32, peak RSS summed
over the processes at most ``--rss-target-mb``, 650 MB). Writes the rows as JSON. Exits 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_pipeline  # noqa: E402 - tests/bench, the script's directory

RUNS = ("read", "floor", "floor_pp", "floor_np", "garmexport")


def measure(events: int, partitions: int, repeat: int, workdir: Path,
            runs: tuple[str, ...] = RUNS) -> dict:
    """One bench_pipeline invocation at ``partitions``; its JSON result."""
    out = workdir / f"pipeline-{partitions}.json"
    bench_pipeline.main(["--events", str(events), "--partitions", str(partitions),
                         "--repeat", str(repeat), "--runs", ",".join(runs),
                         "--json-out", str(out)])
    return json.loads(out.read_text())


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def table(results: dict[int, dict]) -> list[dict]:
    """One row per (partition count, run), with the ratios of the module docstring."""
    rows = []
    base = results[min(results)]["runs"].get("garmexport", {})
    for partitions, result in sorted(results.items()):
        runs = result["runs"]
        floor = runs.get("floor", {})
        np_floor = runs.get("floor_np", {})
        for name in RUNS:
            r = runs.get(name)
            if not r:
                continue
            rate, cpu = r.get(bench_pipeline.RATE), r.get(bench_pipeline.CPU)
            rows.append({
                "partitions": partitions, "run": name, "events_per_s": rate,
                "cpu_s_per_million": cpu,
                "x_floor_rate": ratio(rate, floor.get(bench_pipeline.RATE)),
                "x_floor_cpu": ratio(cpu, floor.get(bench_pipeline.CPU)),
                "x_np_rate": ratio(rate, np_floor.get(bench_pipeline.RATE)),
                "x_np_cpu": ratio(cpu, np_floor.get(bench_pipeline.CPU)),
                "x_np_rss": ratio(r.get("peak_rss_mb"), np_floor.get("peak_rss_mb")),
                "x_first_count_cpu": (ratio(cpu, base.get(bench_pipeline.CPU))
                                      if name == "garmexport" else None),
                "x_first_count_rate": (ratio(rate, base.get(bench_pipeline.RATE))
                                       if name == "garmexport" else None),
                "files_per_million": round(r.get("files", 0) / result["events"] * 1e6),
                "store_calls_per_million": r.get("store_calls_per_million"),
                "store_calls": r.get("store_calls"),
                "peak_rss_mb": r.get("peak_rss_mb"), "peak_pss_mb": r.get("peak_pss_mb"),
            })
    return rows


def np_targets(rows: list[dict], rss_mb: float) -> list[tuple[str, bool | None, str]]:
    """Issue 42's targets: garmexport against the NP floor of the same count and run."""
    found: list[tuple[str, bool | None, str]] = []
    for r in rows:
        if r["run"] != "garmexport":
            continue
        p = r["partitions"]

        def check(title: str, value: float | None, limit: float, smaller: bool) -> None:
            ok = None if value is None else (value <= limit if smaller else value >= limit)
            found.append((f"{title} at {p} partitions", ok, "-" if value is None else f"{value}"))

        check("CPU per event <= 1.25x NP's", r["x_np_cpu"], 1.25, True)
        if p in (4, 32):
            check("events/s >= 1.3x NP's", r["x_np_rate"], 1.3, False)
        check(f"peak RSS (all processes) <= {rss_mb:.0f} MB", r["peak_rss_mb"], rss_mb, True)
    return found


def targets(rows: list[dict], budget_mb: float) -> list[tuple[str, bool | None, str]]:
    ours = {r["partitions"]: r for r in rows if r["run"] == "garmexport"}
    found: list[tuple[str, bool | None, str]] = []

    def check(title: str, value: float | None, limit: float, smaller: bool) -> None:
        ok = None if value is None else (value <= limit if smaller else value >= limit)
        found.append((title, ok, "-" if value is None else f"{value}"))

    if 32 in ours:
        check("CPU per event at 32 partitions <= 1.25x at 4", ours[32]["x_first_count_cpu"],
              1.25, True)
        check("events/s at 32 partitions >= 0.9x at 4", ours[32]["x_first_count_rate"], 0.9,
              False)
    if 128 in ours:
        check("CPU per event at 128 partitions <= 1.5x at 4", ours[128]["x_first_count_cpu"],
              1.5, True)
    if ours:
        top = ours[max(ours)]
        check(f"peak RSS at {max(ours)} partitions <= {budget_mb:.0f} MB", top["peak_rss_mb"],
              budget_mb, True)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--partitions", default="4,32,128")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-budget-mb", type=float, default=700.0)
    parser.add_argument("--rss-target-mb", type=float, default=650.0,
                        help="issue 42's peak RSS target, summed over the processes")
    parser.add_argument("--runs", default=",".join(RUNS),
                        help=f"which of {','.join(RUNS)} (the ratios need floor, floor_np)")
    parser.add_argument("--json-out", default="bench-results/partitions.json")
    args = parser.parse_args(argv)
    counts = sorted(int(p) for p in args.partitions.split(","))
    runs = tuple(r for r in args.runs.split(",") if r)
    unknown = set(runs) - set(RUNS)
    if unknown:
        parser.error(f"unknown runs {sorted(unknown)}; known: {','.join(RUNS)}")
    with tempfile.TemporaryDirectory(prefix="bench-partitions-") as tmp:
        results = {p: measure(args.events, p, args.repeat, Path(tmp), runs) for p in counts}
    rows = table(results)
    print(f"\n{results[counts[0]]['events']} events; medians of {args.repeat}; steady state")
    print(f"{'parts':>5} {'run':<11} {'ev/s':>9} {'CPU s/M':>8} {'x floor':>7} {'CPU x fl':>8} "
          f"{'x NP':>6} {'CPU x NP':>8} {'RSS x NP':>8} "
          f"{'CPU x 1st':>9} {'ev/s x 1st':>10} {'files/M':>8} {'calls/M':>8} {'RSS MB':>7}")
    for r in rows:
        def cell(v: object) -> str:
            return "-" if v is None else str(v)
        print(f"{r['partitions']:>5} {r['run']:<11} {cell(r['events_per_s']):>9} "
              f"{cell(r['cpu_s_per_million']):>8} {cell(r['x_floor_rate']):>7} "
              f"{cell(r['x_floor_cpu']):>8} {cell(r['x_np_rate']):>6} "
              f"{cell(r['x_np_cpu']):>8} {cell(r['x_np_rss']):>8} "
              f"{cell(r['x_first_count_cpu']):>9} "
              f"{cell(r['x_first_count_rate']):>10} {cell(r['files_per_million']):>8} "
              f"{cell(r['store_calls_per_million']):>8} {cell(r['peak_rss_mb']):>7}")
    print("\ntargets (issue 31):")
    found = targets(rows, args.memory_budget_mb)
    for title, ok, value in found:
        state = "not measured" if ok is None else ("held" if ok else "NOT held")
        print(f"  {state:12} {title}: {value}")
    print("\ntargets (issue 42, against the NP floor of the same run):")
    found_np = np_targets(rows, args.rss_target_mb)
    for title, ok, value in found_np:
        state = "not measured" if ok is None else ("held" if ok else "NOT held")
        print(f"  {state:12} {title}: {value}")
    found += found_np
    out = Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"events": args.events, "repeat": args.repeat, "rows": rows,
                               "targets": [{"target": t, "held": ok, "value": v}
                                           for t, ok, v in found]}, indent=2))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
