"""Export throughput against its ceilings: read limit, native floor, plain pipeline, exporters.

``python tests/bench/bench_pipeline.py [--events 1000000] [--json-out bench-results/pipeline.json]``

The workload is produced to an embedded tansu broker before any timing starts: generator
events in the default type mix, 4 partitions, 3 days of event time with 5 % late events
and 0.2 % bad records (``--bad-share``). Then, each reading the topic from the start with
its own consumer group, each as its own process, one after the other:

1. ``read``: a confluent-kafka loop that does nothing with the records (read_limit.py);
2. ``floor``: the native floor, one process with the same consumer settings: frame heads
   per poll (numpy), frames gathered per type, ptars (upb only when it refuses a batch),
   the exporter's Parquet settings per (type, day), no protocol, no actors (native_floor.py);
   ``floor_pp`` is the same with a file per (type, partition, day), the files garmexport's
   shape requires (``--per-partition``): what the shape costs, told apart from the rest;
   ``floor_np`` (the NP floor) writes exactly those files, each opened once with its row
   groups appended (``--append``), where ``floor_pp`` writes a file per flush of a group;
3. ``plain``: the plainest single-process pipeline doing the same work (plain_pipeline.py);
4. ``garmexport``: ``garmexport run`` with its defaults, until /metrics shows every record
   consumed and lag 0 on every partition (so everything is published);
5. ``garmexport x2``: two ``garmexport run`` in one consumer group, until the consumed sum
   reaches N and every partition has lag 0.

An exporter run named ``..._cores<N>`` (``garmexport_cores1``, ``garmexport_x2_cores1``)
sets ``GARMEXPORT_ACTORS_CORES=N``; one named ``..._par<N>`` (``garmexport_par1``,
``garmexport_par2``, ``garmexport_x2_par1``) sets ``GARMEXPORT_ACTORS_PARALLELISM=N``, the
readers per instance (README, Readers in parallel: its peak RSS and CPU are the whole
process tree's, supervisor and readers); the others use the defaults (the CPUs the process
may use, for both). ``garmexport_cores1`` is the exporter confined to one worker thread: the ratio of
``garmexport`` to it is what the worker threads gain, in the same run.
A name may end with ``+TAG`` (``garmexport_par2+arena2``): the run is NAME's, with the
environment ``--tag-env TAG:KEY=VALUE`` gives it, so a variant and its baseline alternate
in one invocation on the same topic; ``--tag-root TAG:PATH`` runs another checkout
(the code before a change) as NAME+TAG.

The headline is the steady state: from the first record received to done, so the group
join of the test broker (about 5 s, a wait, not work) is in none of the rates or ratios;
it is reported on its own (``join_s``: process start to first record). The first record
is when the loop saw it (read, floor, plain) or the exporter's ``first_record`` log event
(the earliest of the instances). Done is when the last record was consumed (read), written
(floor, plain), or published (garmexport: the ctime of the newest published file, once
/metrics confirmed that nothing is left; the JSON also keeps ``seconds_to_detected``, when
the 0.5 s poll of /metrics saw it). Steady CPU seconds are the process's CPU at done minus
its CPU at the first record (all threads; the exporters log theirs in ``first_record``,
their end comes from /proc when the poll saw the end, so it includes up to 0.5 s of idle
tail); total CPU seconds and peak RSS (sum over the process tree at each 0.2 s sample, max
over samples) come from /proc. Prints a table with every run against the read limit and
the native floor of the same run (events/s, and CPU per event against the floor's), the
steady-state ratios, and whether each target of issue 21 holds; writes JSON. Exits 0
whatever the numbers: a benchmark reports, it does not fail a build.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from procstats import TreeSampler, kill_tree, spawn, wait_cpu  # noqa: E402

MB = 1_000_000
AGED = "_age5"  # suffix of the exporter runs with a 5 s file age instead of the default
TIMEOUT_S = 900.0
#: how often the exporters' /metrics are read while waiting for the end. The end is timed
#: from the files, not from these reads, but each read is CPU the run counts: about 5 ms at
#: 4 partitions, 0.5 s at 128 (the supervisor renders and merges its readers' series, and
#: there is one per (type, partition) of several gauges): every 0.5 s, the reads were most
#: of a 128-partition run's CPU. Prometheus reads every 15-30 s.
POLL_S = 5.0


# ----------------------------------------------------------------- shared by the bench scripts

def start_with_topic(work: Path, topic: str, partitions: int):
    """Start the embedded broker and create ``topic``; returns the broker (caller stops it)."""
    from garmexport.kafka.topics import create_topic
    from garmexport.testbed.embedded_broker import start_broker

    broker = start_broker(work)
    try:
        create_topic(broker.bootstrap, topic, partitions)
    except BaseException:
        broker.stop()
        raise
    return broker


def produce_events(bootstrap: str, topic: str, events: int, partitions: int, days: int = 3,
                   mix: dict[str, float] | None = None, now_ms: int | None = None,
                   bad_share: float = 0.0) -> dict:
    """Produce ``events`` generator records (5 % late, ``bad_share`` bad); returns the
    produce report."""
    from garmexport.cli.produce import produce
    from garmexport.kafka.producer import PRODUCER_SETTINGS
    from garmexport.testbed.generator import DEFAULT_MIX, Spec

    spec = Spec(now_ms=now_ms or int(time.time() * 1000), partitions=partitions, days=days,
                late_share=0.05, bad_share=bad_share, mix=dict(mix or DEFAULT_MIX))
    return produce({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS}, topic, spec, events)


def exporter_env(bootstrap: str, topic: str, group: str, out: Path, **extra: str) -> dict[str, str]:
    """Environment for ``garmexport run``: its defaults plus where to read and write,
    metrics on a free loopback port, JSON logs; ``extra`` adds GARMEXPORT_* overrides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GARMEXPORT_")}
    env.update({
        "GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "GARMEXPORT_SOURCE_TOPIC": topic,
        "GARMEXPORT_SOURCE_GROUP_ID": group, "GARMEXPORT_OUTPUT_ROOT": str(out),
        "GARMEXPORT_METRICS_PORT": "0", "GARMEXPORT_METRICS_HOST": "127.0.0.1",
        "GARMEXPORT_LOG_FORMAT": "json", "PYTHONPATH": str(ROOT),
    })
    env.update(extra)
    return env


#: in an exporter's environment: run the checkout at this path instead of this one
#: (``--tag-root``); read here, never passed on
CHECKOUT_VAR = "BENCH_CHECKOUT"


def start_exporter(env: dict[str, str], log: Path):
    env = dict(env)
    root = env.pop(CHECKOUT_VAR, str(ROOT))
    env["PYTHONPATH"] = env.get("PYTHONPATH", root).replace(str(ROOT), root)
    return spawn([sys.executable, "-m", "garmexport", "run"], str(log), env=env, cwd=root)


def log_events(log: Path, name: str) -> list[dict]:
    """The JSON log records of event ``name`` in ``log`` (non-JSON lines are skipped)."""
    found = []
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return found
    for line in text.splitlines():
        if f'"{name}"' in line:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == name:
                found.append(record)
    return found


def log_wall_s(record: dict) -> float:
    """The ``ts`` of a JSON log record as epoch seconds."""
    return dt.datetime.fromisoformat(record["ts"].replace("Z", "+00:00")).timestamp()


def metrics_port(log: Path) -> int | None:
    records = log_events(log, "metrics_serving")
    return int(records[0]["port"]) if records else None


def scrape(port: int) -> tuple[dict[int, float], dict[int, float]]:
    """(consumed by partition, lag by partition) from the exporter's /metrics."""
    consumed, lag, _ = scrape_all(port)
    return consumed, lag


def scrape_all(port: int) -> tuple[dict[int, float], dict[int, float], dict[str, float]]:
    """:func:`scrape`, and the calls to the output store by kind (summed over readers)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    consumed: dict[int, float] = {}
    lag: dict[int, float] = {}
    calls: dict[str, float] = {}
    for line in text.splitlines():
        call = re.match(r'garmexport_store_calls_total\{(.*)\} (\S+)$', line)
        if call:
            op = re.search(r'op="(\w+)"', call.group(1))
            if op:
                calls[op.group(1)] = calls.get(op.group(1), 0.0) + float(call.group(2))
            continue
        m = re.match(r'garmexport_(events_consumed_total|consumer_lag_offsets)\{(.*)\} (\S+)$', line)
        if m:
            part = re.search(r'partition="(\d+)"', m.group(2))
            if part:
                target = consumed if m.group(1).startswith("events") else lag
                target[int(part.group(1))] = float(m.group(3))
    return consumed, lag, calls


def data_files(out: Path) -> list[Path]:
    """Published data files (not quarantine, temp or bookkeeping under ``_`` names)."""
    return [p for p in out.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(out).parts)]


def last_published_s(out: Path) -> float | None:
    """Wall time of the last publish under ``out``: the newest inode change of a data or
    quarantine file (publishing links the staged file to its name, which sets the ctime)."""
    files = data_files(out) + list((out / "_quarantine").rglob("*.parquet"))
    return max((p.stat().st_ctime for p in files), default=None)


# ----------------------------------------------------------------------------- the runs

def run_program(name: str, script: str, args: list[str], work: Path) -> dict:
    """Run read_limit.py, native_floor.py or plain_pipeline.py to completion; its
    measurements."""
    log = work / f"{name}.log"
    started = time.time()
    proc = spawn([sys.executable, str(HERE / script), *args], str(log), cwd=str(ROOT))
    try:
        with TreeSampler(proc.pid) as sampler:
            cpu = wait_cpu(proc, TIMEOUT_S)
            usage = sampler.stop()
    finally:
        kill_tree(proc)
    lines = [ln for ln in log.read_text().splitlines() if ln.startswith("{")]
    if cpu is None or not lines:
        raise RuntimeError(f"{name} did not finish; see {log}")
    result = json.loads(lines[-1])
    return {"started_s": started, "done_s": result["done_wall_s"],
            "first_s": result["first_record_wall_s"], "cpu_s": max(cpu, usage.cpu_s),
            "steady_cpu_s": result["done_cpu_s"] - result["first_record_cpu_s"],
            "peak_rss": usage.peak_rss_bytes, "peak_pss": usage.peak_pss_bytes,
            "files": result.get("files", 0),
            "exit_code": proc.returncode}


def run_exporters(name: str, instances: int, env: dict[str, str], events: int,
                  partitions: int, work: Path, out: Path) -> dict:
    """Run ``instances`` exporters in one group until all N records are published."""
    logs = [work / f"{name}-{i}.log" for i in range(instances)]
    started = time.time()
    procs = [start_exporter(env, log) for log in logs]
    consumed_at = None
    try:
        with TreeSampler(*(p.pid for p in procs)) as sampler:
            ports: list[int | None] = [None] * instances
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not catch up in {TIMEOUT_S} s; see {logs}")
                for p, log in zip(procs, logs):
                    if p.poll() is not None:
                        raise RuntimeError(f"{name} exited with {p.returncode}; see {log}")
                ports = [port or metrics_port(log) for port, log in zip(ports, logs)]
                if all(ports):
                    consumed, lag, calls = 0.0, {}, {}
                    for port in ports:
                        c, lg, calls_one = scrape_all(port)
                        consumed += sum(c.values())
                        lag.update(lg)
                        for op, n in calls_one.items():
                            calls[op] = calls.get(op, 0.0) + n
                    if consumed >= events and consumed_at is None:
                        consumed_at = time.time()
                    if consumed >= events and len(lag) == partitions and not any(lag.values()):
                        detected = time.time()
                        break
                time.sleep(POLL_S)
            usage = sampler.stop()  # before the shutdown: its CPU is not the export's
    finally:
        for p in procs:
            kill_tree(p, grace_s=30.0)
    assigned = [log_wall_s(r) for log in logs for r in log_events(log, "assigned")]
    firsts = [r for log in logs for r in log_events(log, "first_record")]
    # Done when the last record was published, not when this loop saw it: the loop only
    # confirms it (lag 0 everywhere means nothing is left to publish). The read limit and
    # the plain pipeline time their own end the same way, in-process.
    done = min(detected, last_published_s(out) or detected)
    return {"started_s": started, "done_s": done, "detected_s": detected,
            "assigned_s": min(assigned) if assigned else None,
            "first_s": min(log_wall_s(r) for r in firsts) if firsts else None,
            "steady_cpu_s": usage.cpu_s - sum(float(r["process_cpu_s"]) for r in firsts),
            "consumed_s": consumed_at, "cpu_s": usage.cpu_s, "peak_rss": usage.peak_rss_bytes,
            "peak_pss": usage.peak_pss_bytes, "files": len(data_files(out)),
            "store_calls": calls, "exit_code": [p.returncode for p in procs]}


def summarize(raw: dict, events: int, value_bytes: int) -> dict:
    """Rates and per-event costs of one run's raw measurements: the steady state (first
    record to done) first, then the join and the totals."""
    total_s = raw["done_s"] - raw["started_s"]
    steady_s = raw["done_s"] - raw["first_s"] if raw.get("first_s") else None
    row = {
        "steady_s": round(steady_s, 2) if steady_s else None,
        "steady_events_per_s": round(events / steady_s) if steady_s else None,
        "steady_input_mb_per_s": round(value_bytes / steady_s / MB, 2) if steady_s else None,
        "steady_cpu_s_per_million": round(raw["steady_cpu_s"] / events * 1e6, 2),
        "join_s": round(raw["first_s"] - raw["started_s"], 2) if raw.get("first_s") else None,
        "seconds": round(total_s, 2),
        "events_per_s": round(events / total_s),
        "cpu_s": round(raw["cpu_s"], 2),
        "cpu_s_per_million": round(raw["cpu_s"] / events * 1e6, 2),
        "peak_rss_mb": round(raw["peak_rss"] / MB, 1),
        # each page once: what a memory cgroup charges (procstats)
        "peak_pss_mb": round(raw.get("peak_pss", 0) / MB, 1),
        "files": raw["files"],
    }
    if raw.get("store_calls"):  # an exporter's, from /metrics when it was done
        row["store_calls_per_million"] = round(sum(raw["store_calls"].values()) / events * 1e6)
        row["store_calls"] = {op: int(n) for op, n in sorted(raw["store_calls"].items())}
    if raw.get("assigned_s"):
        row["assigned_s"] = round(raw["assigned_s"] - raw["started_s"], 2)
    if raw.get("consumed_s"):
        row["seconds_to_all_consumed"] = round(raw["consumed_s"] - raw["started_s"], 2)
    if raw.get("detected_s"):
        row["seconds_to_detected"] = round(raw["detected_s"] - raw["started_s"], 2)
    return row


def median_row(rows: list[dict]) -> dict:
    """Per-field median over repeated runs (numbers only; the rest from the first run)."""
    out = dict(rows[0])
    for key, value in rows[0].items():
        values = sorted(r[key] for r in rows if isinstance(r.get(key), (int, float)))
        if isinstance(value, (int, float)) and values:
            out[key] = values[len(values) // 2]
    return out


RATE, CPU = "steady_events_per_s", "steady_cpu_s_per_million"


def against(row: dict, base: dict | None, key: str) -> float | None:
    """``row``'s steady figure ``key`` over ``base``'s, or None if either lacks it."""
    if not base or not row.get(key) or not base.get(key):
        return None
    return round(row[key] / base[key], 3)


def ratios_of(rows: dict, suffix: str = "") -> dict[str, float]:
    """Steady-state ratios: every run (``suffix``: only the exporter runs so named) against
    the read limit and the native floor of the same run, in events/s and in CPU per event,
    the exporters against the plain pipeline; then the exporters against each other."""
    found = {}
    for name, row in rows.items():
        if suffix and not name.endswith(suffix):
            continue
        bases = ("read", "floor") + (("plain",) if name.startswith("garmexport") else ())
        for base, key in [(b, RATE) for b in bases] + [("floor", CPU)]:
            ratio = against(row, rows.get(base), key)
            if name != base and ratio is not None:
                found[f"{name}/{base} {'events/s' if key == RATE else 'CPU per event'}"] = ratio
    one, two = rows.get("garmexport" + suffix), rows.get("garmexport_x2" + suffix)
    if one and two and one.get(RATE) and two.get(RATE):
        found[f"garmexport_x2{suffix}/garmexport{suffix} events/s"] = round(two[RATE] / one[RATE], 3)
    # two instances of one reader each against one instance of two readers (issue 21); the
    # default run's parallelism is the usable CPUs, 2 on the machines this is made for
    par2_name = "garmexport_par2" if "garmexport_par2" + suffix in rows else "garmexport"
    par2, x2par1 = rows.get(par2_name + suffix), rows.get("garmexport_x2_par1" + suffix)
    if par2 and x2par1 and par2.get(RATE) and x2par1.get(RATE):
        found[f"garmexport_x2_par1{suffix}/{par2_name}{suffix} events/s"] = \
            round(x2par1[RATE] / par2[RATE], 3)
    single = rows.get("garmexport_cores1")
    if not suffix and one and single and one.get(RATE) and single.get(RATE):
        found["garmexport/garmexport_cores1 events/s"] = round(one[RATE] / single[RATE], 3)
    return found


def targets(rows: dict, events: int, suffix: str = "") -> list[tuple[str, bool | None, str]]:
    """(target, held?, the numbers) for each target of issue 21 (16's where 21 has none),
    on the steady state; None: not measured. ``suffix`` picks the exporter runs (``""``:
    defaults, ``_age5``: short file age)."""
    r, f, p = rows.get("read"), rows.get("floor"), rows.get("plain")
    g, g2 = rows.get("garmexport" + suffix), rows.get("garmexport_x2" + suffix)
    found = []

    def check(title, parts, ok, numbers):
        measured = all(parts) and all(x.get(RATE) for x in parts)
        found.append((f"[{suffix.strip('_')}] {title}" if suffix else title,
                      ok(*parts) if measured else None, numbers(*parts) if measured else "-"))

    def ratio(key, limit, smaller=False):
        def ok(a, b):
            return a[key] <= limit * b[key] if smaller else a[key] >= limit * b[key]
        return ok, lambda a, b: f"{a[key] / b[key]:.2f}x"

    check("garmexport >= 0.5x read limit (events/s)", (g, r), *ratio(RATE, 0.5))
    check("garmexport >= 1.2x native floor (events/s)", (g, f), *ratio(RATE, 1.2))
    check("garmexport CPU/event <= 1.4x native floor's", (g, f), *ratio(CPU, 1.4, smaller=True))
    check("two garmexport gain over one (events/s)", (g2, g), *ratio(RATE, 1.0))
    check("garmexport >= 1.5x plain (events/s)", (g, p), *ratio(RATE, 1.5))
    check(f"garmexport peak RSS <= 700 MB ({events} events; the target is for 1M)", (g,),
          lambda a: a["peak_rss_mb"] <= 700, lambda a: f"{a['peak_rss_mb']:.0f} MB")
    # issue 21's pairings: parallelism 1 held to the same CPU and memory targets, and one
    # instance of N readers against N instances of one reader each (N = 2 here: the
    # default run is "garmexport", whose parallelism is the usable CPUs)
    p1, x2p1 = rows.get("garmexport_par1" + suffix), rows.get("garmexport_x2_par1" + suffix)
    check("garmexport_par1 CPU/event <= 1.4x native floor's", (p1, f),
          *ratio(CPU, 1.4, smaller=True))
    check(f"garmexport_par1 peak RSS <= 700 MB ({events} events)", (p1,),
          lambda a: a["peak_rss_mb"] <= 700, lambda a: f"{a['peak_rss_mb']:.0f} MB")
    check("garmexport (default parallelism) within 10 % of two instances of "
          "parallelism 1 (events/s)", (g, x2p1), *ratio(RATE, 0.9))
    return found


def print_table(rows: dict, produced: dict, events: int) -> dict[str, float]:
    print(f"\n{events} events, {produced['value_bytes'] / MB:.1f} MB of values, "
          f"{len(produced['partitions'])} partitions")
    head = (f"{'run':20} {'steady s':>8} {'ev/s':>9} {'CPU s/M':>8} {'x read':>7} "
            f"{'x floor':>7} {'CPU x fl':>8} | {'join s':>6} {'total s':>7} {'CPU s/M':>8} "
            f"{'RSS MB':>7} {'PSS MB':>7} {'files':>6}")
    print(head + "\n" + "-" * len(head))

    def cell(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "-"

    for name, row in rows.items():
        steady_s, rate = row["steady_s"], row[RATE]
        print(f"{name:20} {steady_s if steady_s else '-':>8} {f'{rate:,}' if rate else '-':>9} "
              f"{row[CPU]:8.2f} {cell(against(row, rows.get('read'), RATE)):>7} "
              f"{cell(against(row, rows.get('floor'), RATE)):>7} "
              f"{cell(against(row, rows.get('floor'), CPU)):>8} | "
              f"{row['join_s'] if row['join_s'] else '-':>6} "
              f"{row['seconds']:7.1f} {row['cpu_s_per_million']:8.2f} "
              f"{row['peak_rss_mb']:7.0f} {row.get('peak_pss_mb', 0):7.0f} {row['files']:6}")
    print("steady: from the first record received to done (last record consumed, last file "
          "written or published), CPU over that span; x read, x floor: events/s against the "
          "read limit's and the native floor's in this run; CPU x fl: CPU per event against "
          "the floor's; join: process start to first record; total: process start to done; RSS: "
          "peak of the sum over the run's processes (a library page mapped by two processes "
          "counts twice); PSS: the same peak counting every page once, as a memory cgroup "
          "does")
    for name, row in rows.items():
        if "seconds_to_all_consumed" in row:
            print(f"{name}: assigned after {row.get('assigned_s', '-')} s, first record after "
                  f"{row['join_s']} s, all consumed after {row['seconds_to_all_consumed']} s, "
                  f"all published after {row['seconds']} s (seen by the poll of /metrics "
                  f"after {row.get('seconds_to_detected', '-')} s)")
    ratios = {**ratios_of(rows), **ratios_of(rows, AGED)}
    print("steady-state ratios:\n" + "\n".join(f"  {k} = {v:.2f}" for k, v in ratios.items()))
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--bad-share", type=float, default=0.002,
                        help="share of bad records (bad frame heads, headers or bodies)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; medians reported")
    parser.add_argument("--runs", default="read,floor,plain,garmexport,garmexport_par1,"
                        f"garmexport_x2,garmexport{AGED},garmexport_x2{AGED}",
                        help="which runs, comma-separated; the *_age5 runs set "
                        "GARMEXPORT_WRITER_MAX_FILE_AGE_S=5, so the publish tail after the "
                        "last record is seconds, not the default minute")
    parser.add_argument("--exporter-env", action="append", default=[], metavar="KEY=VALUE",
                        help="GARMEXPORT_* override for the exporter runs (default: none)")
    parser.add_argument("--tag-env", action="append", default=[], metavar="TAG:KEY=VALUE",
                        help="environment of the exporter runs named NAME+TAG only, so that a "
                        "variant is paired with NAME in the same invocation "
                        "(e.g. --runs garmexport,garmexport+arena2 --tag-env "
                        "arena2:MALLOC_ARENA_MAX=2)")
    parser.add_argument("--tag-root", action="append", default=[], metavar="TAG:PATH",
                        help="the exporter runs named NAME+TAG run the checkout at PATH "
                        "(e.g. a git worktree of main): before and after in one invocation")
    parser.add_argument("--json-out", default="bench-results/pipeline.json")
    parser.add_argument("--workdir", help="keep logs and output here (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    runs = [r for r in args.runs.split(",") if r]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-pipeline-"))
    work.mkdir(parents=True, exist_ok=True)
    topic = "garmadon"
    extra = dict(kv.split("=", 1) for kv in args.exporter_env)
    tagged: dict[str, dict[str, str]] = {}
    for spec in args.tag_env:
        tag, _, kv = spec.partition(":")
        key, _, value = kv.partition("=")
        tagged.setdefault(tag, {})[key] = value
    for spec in args.tag_root:
        tag, _, path = spec.partition(":")
        tagged.setdefault(tag, {})[CHECKOUT_VAR] = str(Path(path).resolve())
    broker = None
    try:
        broker = start_with_topic(work, topic, args.partitions)
        print(f"producing {args.events} events to {broker.bootstrap} (not timed)", flush=True)
        produced = produce_events(broker.bootstrap, topic, args.events, args.partitions,
                                  args.days, bad_share=args.bad_share)
        n = produced["total"]
        measured: dict[str, list[dict]] = {}
        programs = {"read": ("read_limit.py", []), "floor": ("native_floor.py", []),
                    "floor_pp": ("native_floor.py", ["--per-partition"]),
                    "floor_np": ("native_floor.py", ["--append"]),
                    "plain": ("plain_pipeline.py", [])}
        for attempt in range(args.repeat):
            for name in runs:
                group = f"bench-{name}-{attempt}"
                out = work / f"out-{name}-{attempt}"
                common = ["--bootstrap", broker.bootstrap, "--topic", topic, "--group", group,
                          "--events", str(n)]
                print(f"run {attempt + 1}/{args.repeat}: {name}", flush=True)
                if name in programs:
                    script, options = programs[name]
                    outs = [] if name == "read" else ["--out", str(out), *options]
                    raw = run_program(name, script, [*common, *outs], work)
                else:
                    base, _, tag = name.partition("+")
                    aged = {"GARMEXPORT_WRITER_MAX_FILE_AGE_S": "5"} if base.endswith(AGED) else {}
                    cores = re.search(r"_cores(\d+)$", base)
                    if cores:
                        aged["GARMEXPORT_ACTORS_CORES"] = cores.group(1)
                    readers = re.search(r"_par(\d+)", base)
                    if readers:
                        aged["GARMEXPORT_ACTORS_PARALLELISM"] = readers.group(1)
                    env = exporter_env(broker.bootstrap, topic, group, out, **aged, **extra,
                                       **tagged.get(tag, {}))
                    raw = run_exporters(name, 2 if "_x2" in name else 1, env, n,
                                        args.partitions, work, out)
                measured.setdefault(name, []).append(summarize(raw, n, produced["value_bytes"]))
                shutil.rmtree(out, ignore_errors=True)
        rows = {name: median_row(values) for name, values in measured.items()}
        ratios = print_table(rows, produced, n)
        found = targets(rows, n) + targets(rows, n, AGED)
        print("\ntargets (steady state):")
        for title, ok, numbers in found:
            state = "not measured" if ok is None else ("held" if ok else "NOT held")
            print(f"  {state:12} {title}: {numbers}")
        result = {"events": n, "value_bytes": produced["value_bytes"],
                  "partitions": args.partitions, "days": args.days, "bad_share": args.bad_share,
                  "repeat": args.repeat, "exporter_env": extra, "cpus": os.cpu_count(),
                  "loadavg_at_end": os.getloadavg(), "runs": rows, "all_runs": measured,
                  "ratios": ratios,
                  "targets": [{"target": t, "held": ok, "value": v} for t, ok, v in found]}
        out_path = Path(args.json_out)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(result, indent=2))
        print(f"\nwrote {out_path}")
    finally:
        if broker is not None:
            broker.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    main()
    raise SystemExit(0)
