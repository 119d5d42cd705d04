"""Catch-up cost on HDFS: ``garmexport run`` on a local root and on a real HDFS, alternating.

``python tests/bench/bench_hdfs.py [--events 200000] [--repeat 3] [--json-out bench-results/hdfs.json]``

The workload is bench_pipeline's, produced to an embedded tansu broker before any timing:
generator events in the default type mix, 4 partitions, 3 days, 5 % late, 0.2 % bad
records. A real HDFS is started by the bench (Hadoop's MiniDFSCluster: a NameNode and
``--datanodes`` DataNodes in one JVM, :mod:`tests.hdfs_cluster`; the jars are fetched
with Maven on first use), with a directory ``/bench`` owned by the exporter's HDFS user
(``garm``: the NameNode enforces permissions). Then, ``--repeat`` times in turn, each
reading the whole topic with its own consumer group as its own process tree:

- ``local``: ``garmexport run`` with its defaults on a local directory;
- ``webhdfs``: the same on ``webhdfs://127.0.0.1:PORT/bench/out-...`` of that cluster.

A name may end with ``+TAG`` (``webhdfs+before``); ``--tag-root TAG:PATH`` runs the
checkout at PATH (a git worktree of an older commit) for it: before and after a change in
one invocation, alternating.

Steady state as bench_pipeline times it: from the exporter's first record to the last
file published (locally the newest ctime of a published file; on HDFS the newest
modification time of a directory holding published files, which a RENAME into it sets),
confirmed by /metrics (every record consumed, lag 0); the group join is reported apart.
CPU is the exporter's whole process tree (supervisor and readers) over the steady state;
the MiniHdfs JVM's CPU over the same span is reported apart (it is sampled during every
run: during a local run it is the cluster's idle cost, heartbeats and the like).

At the moment the end is seen, before the exporter is stopped (its shutdown writes final
markers, which are not the catch-up's): the exporter's store calls by kind
(``garmexport_store_calls_total``) and, for a ``webhdfs`` run, the NameNode's own counts
since the run began (the launcher's ``nn-ops``): the WebHDFS requests its HTTP server
answered by method and op (``PUT CREATE`` is a CREATE's redirect; its data goes to a
DataNode, which asks the NameNode ``create`` by RPC), every audited namespace call by
protocol and command (``webhdfs getfileinfo``, ``rpc create``; a RENAME answered false
is not audited), and NameNodeActivity's counters (CreateFileOps, FilesRenamed,
FileInfoOps, AddBlockOps, BlockReceivedAndDeletedOps, ...). NameNode requests are the
WebHDFS requests; NameNode calls add the DataNodes' RPCs for the data (CreateFileOps,
AddBlockOps, and one ``complete`` per file created, which no counter shows). Each per
file (published data and quarantine files) and per 1M events; ratios webhdfs over
local. Medians over the repeats. The load average is printed with every run: the
machine may be shared. Exits 0 whatever the numbers: a benchmark reports, it does not
fail a build; without Java or Maven (or the jars) it says why HDFS cannot start, and exits
0 too, having run nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_pipeline import (  # noqa: E402 - tests/bench, the script's directory
    CHECKOUT_VAR, data_files, exporter_env, last_published_s, log_events, log_wall_s,
    median_row, metrics_port, produce_events, scrape_all, start_exporter, start_with_topic,
    summarize,
)
from procstats import TreeSampler, kill_tree  # noqa: E402

HDFS_USER = "garm"
BASE = "/bench"
TIMEOUT_S = 600.0
#: how often /metrics is read while waiting for the end: bench_pipeline's 5 s is for 128
#: partitions; at 4 a read costs the exporter about 5 ms, and the end is timed from the
#: files, not from these reads
POLL_S = 1.0
RATE, CPU = "steady_events_per_s", "steady_cpu_s_per_million"


class CpuTrace:
    """The CPU seconds of one process (the MiniHdfs JVM), sampled every ``interval_s`` in a
    thread, so the CPU of any past span can be read off afterwards."""

    def __init__(self, pid: int, interval_s: float = 0.2) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        ticks = os.sysconf("SC_CLK_TCK")
        while not self._stop.is_set():
            try:  # one file, not procstats' scan of /proc: this runs 5 times a second
                with open(f"/proc/{self.pid}/stat", "rb") as f:
                    fields = f.read().decode().rpartition(")")[2].split()
            except OSError:
                return
            self.samples.append((time.time(), (int(fields[11]) + int(fields[12])) / ticks))
            self._stop.wait(self.interval_s)

    def at(self, when: float) -> float:
        """CPU seconds at wall time ``when`` (the last sample at or before it)."""
        before = [cpu for t, cpu in self.samples if t <= when]
        return before[-1] if before else (self.samples[0][1] if self.samples else 0.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def hdfs_published(storage) -> tuple[int, float | None]:
    """(published data and quarantine files, wall time of the last publish) of an HDFS
    root: the files are the ``.parquet`` ones outside ``_tmp`` and ``_offsets``; the time
    is the newest modification time of a directory that holds them (a RENAME into a
    directory sets it; nothing else changes these directories during a catch-up)."""
    files, last = 0, None
    todo = [""]
    while todo:
        here = todo.pop()
        entries = storage.list(here)
        held = False
        for e in entries:
            path = f"{here}/{e.name}" if here else e.name
            if e.is_dir:
                if here or e.name not in ("_tmp", "_offsets"):
                    todo.append(path)
            elif e.name.endswith(".parquet"):
                files += 1
                held = True
        if held and here:
            up, _, name = here.rpartition("/")
            for e in storage.list(up):
                if e.name == name:
                    last = max(last or 0.0, e.mtime_s)
    return files, last


def delta(before: dict, after: dict) -> dict[str, float]:
    """The NameNode's counts between two ``nn-ops`` answers, flat: ``http PUT RENAME``,
    ``webhdfs rename``, ``rpc create``, ``CreateFileOps`` ... (only those that moved)."""
    out: dict[str, float] = {}
    for op, n in after["http"].items():
        moved = n - before["http"].get(op, 0)
        if moved:
            out[f"http {op}"] = moved
    for proto, cmds in after["audit"].items():
        for cmd, n in cmds.items():
            moved = n - before["audit"].get(proto, {}).get(cmd, 0)
            if moved:
                out[f"{proto} {cmd}"] = moved
    for key, n in after["metrics"].items():
        moved = n - before["metrics"].get(key, 0)
        if moved:
            out[key] = moved
    return out


def run_once(name: str, env: dict[str, str], events: int, partitions: int, work: Path,
             cluster, jvm: CpuTrace, storage=None) -> dict:
    """One ``garmexport run`` until every record is published; its raw measurements.
    ``storage``: the HDFS root's store (a ``webhdfs`` run), read after the end is seen."""
    log = work / f"{name}.log"
    load_before = os.getloadavg()[0]
    nn_before = cluster.command("nn-ops")
    started = time.time()
    proc = start_exporter(env, log)
    consumed_at = detected = None
    try:
        with TreeSampler(proc.pid) as sampler:
            port = None
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not catch up in {TIMEOUT_S} s; see {log}")
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}; see {log}")
                port = port or metrics_port(log)
                if port:
                    consumed_by, lag, calls = scrape_all(port)
                    consumed = sum(consumed_by.values())
                    if consumed >= events and consumed_at is None:
                        consumed_at = time.time()
                    if consumed >= events and len(lag) == partitions and not any(lag.values()):
                        detected = time.time()
                        nn_after = cluster.command("nn-ops")
                        break
                time.sleep(POLL_S)
            usage = sampler.stop()  # before the shutdown: its CPU is not the catch-up's
    finally:
        kill_tree(proc, grace_s=30.0)
    firsts = log_events(log, "first_record")
    if storage is None:
        out = Path(env["GARMEXPORT_OUTPUT_ROOT"])
        files, last = len(data_files(out)), last_published_s(out)
        files += len(list((out / "_quarantine").rglob("*.parquet")))
    else:
        files, last = hdfs_published(storage)
    done = min(detected, last or detected)
    first = min(log_wall_s(r) for r in firsts) if firsts else None
    return {"started_s": started, "done_s": done, "detected_s": detected, "first_s": first,
            "steady_cpu_s": usage.cpu_s - sum(float(r["process_cpu_s"]) for r in firsts),
            "consumed_s": consumed_at, "cpu_s": usage.cpu_s, "peak_rss": usage.peak_rss_bytes,
            "peak_pss": usage.peak_pss_bytes, "files": files, "store_calls": calls,
            "jvm_steady_cpu_s": jvm.at(done) - jvm.at(first or started),
            "jvm_steady_s": done - (first or started),
            "nn": delta(nn_before, nn_after) if storage is not None else {},
            "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "exit_code": proc.returncode}


def row_of(raw: dict, events: int, value_bytes: int) -> dict:
    """bench_pipeline's summary, the JVM's CPU, and every count per file and per 1M
    events, flat (``store put/file``, ``nn webhdfs rename/file`` ...) so that the median
    of each is taken on its own."""
    row = summarize(raw, events, value_bytes)
    row.pop("store_calls", None)
    files = max(raw["files"], 1)
    row["jvm_steady_cpu_s_per_million"] = round(raw["jvm_steady_cpu_s"] / events * 1e6, 2)
    row["jvm_cpu_per_s"] = round(raw["jvm_steady_cpu_s"] / max(raw["jvm_steady_s"], 1e-9), 3)
    row["load_start"], row["load_end"] = raw["load"]
    counts = {f"store {op}": n for op, n in raw["store_calls"].items()}
    nn = raw["nn"]
    if nn:
        counts["nn requests"] = sum(n for k, n in nn.items() if k.startswith("http "))
        # the DataNodes' RPCs for the data: create, addBlock, and a complete per create
        rpc = nn.get("CreateFileOps", 0) * 2 + nn.get("AddBlockOps", 0)
        counts["nn calls"] = counts["nn requests"] + rpc
        counts.update({f"nn {k}": n for k, n in nn.items()})
    counts["store calls"] = sum(raw["store_calls"].values())
    for key, n in counts.items():
        row[f"{key}/file"] = round(n / files, 3)
        row[f"{key}/M"] = round(n / events * 1e6)
    return row


def ratio(a, b) -> float | None:
    return round(a / b, 3) if a and b else None


def print_table(rows: dict[str, dict], produced: dict, events: int) -> dict[str, float]:
    print(f"\n{events} events, {produced['value_bytes'] / 1e6:.1f} MB of values, "
          f"{len(produced['partitions'])} partitions; medians")
    head = (f"{'run':16} {'steady s':>8} {'ev/s':>8} {'CPU s/M':>8} {'JVM s/M':>8} "
            f"{'join s':>6} {'files':>5} {'store/f':>7} {'NN req/f':>8} {'NN req/M':>8} "
            f"{'NN calls/f':>10} {'RSS MB':>6} {'load':>9}")
    print(head + "\n" + "-" * len(head))
    for name, r in rows.items():
        nn_f, nn_m, calls_f = (r.get(k) for k in ("nn requests/file", "nn requests/M",
                                                  "nn calls/file"))
        print(f"{name:16} {r['steady_s'] or '-':>8} {r[RATE] or 0:>8,} {r[CPU]:8.2f} "
              f"{r['jvm_steady_cpu_s_per_million']:8.2f} {r['join_s'] or '-':>6} "
              f"{r['files']:5} {r['store calls/file']:7.2f} "
              f"{nn_f if nn_f is not None else '-':>8} {nn_m if nn_m is not None else '-':>8} "
              f"{calls_f if calls_f is not None else '-':>10} "
              f"{r['peak_rss_mb']:6.0f} {r['load_start']:4.1f}-{r['load_end']:<4.1f}")
    print("steady: first record to the last file published; CPU s/M: the exporter's process "
          "tree over it, per 1M events; JVM s/M: the MiniHdfs JVM's over the same span (in a "
          "local run, its idle cost); store/f: the exporter's store calls per published file; "
          "NN req: WebHDFS requests the NameNode answered; NN calls: those and the DataNodes' "
          "RPCs for the data (create, addBlock, complete); load: the 1-minute load average at "
          "the start and end")
    for name, r in rows.items():
        per_file = {k[:-5]: v for k, v in r.items() if k.endswith("/file") and v}
        for title, prefix in (("store calls", "store "), ("NameNode requests", "nn http "),
                              ("NameNode audit, webhdfs", "nn webhdfs "),
                              ("NameNode audit, rpc", "nn rpc ")):
            some = {k[len(prefix):]: v for k, v in per_file.items() if k.startswith(prefix)}
            if some:
                print(f"{name}, {title} per file: "
                      + ", ".join(f"{k} {v:g}" for k, v in some.items()))
    found: dict[str, float] = {}
    local = rows.get("local")
    for name, r in rows.items():
        if name == "local" or not local:
            continue
        for key, label in ((RATE, "events/s"), (CPU, "CPU per event"),
                           ("store calls/file", "store calls per file")):
            value = ratio(r.get(key), local.get(key))
            if value is not None:
                found[f"{name}/local {label}"] = value
    print("ratios:\n" + "\n".join(f"  {k} = {v:.2f}" for k, v in found.items()))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--bad-share", type=float, default=0.002)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; medians reported")
    parser.add_argument("--runs", default="local,webhdfs",
                        help="comma-separated: local, webhdfs, each optionally NAME+TAG")
    parser.add_argument("--tag-root", action="append", default=[], metavar="TAG:PATH",
                        help="the runs named NAME+TAG run the checkout at PATH (e.g. a git "
                        "worktree of the commit before a change)")
    parser.add_argument("--datanodes", type=int, default=2)
    parser.add_argument("--json-out", default="bench-results/hdfs.json")
    parser.add_argument("--workdir", help="keep logs and local output here (default: a temp "
                        "dir, removed)")
    args = parser.parse_args(argv)
    runs = [r for r in args.runs.split(",") if r]
    for name in runs:
        if name.partition("+")[0] not in ("local", "webhdfs"):
            parser.error(f"--runs: unknown run {name!r} (local or webhdfs, optionally +TAG)")
    roots = {}
    for spec in args.tag_root:
        tag, _, path = spec.partition(":")
        roots[tag] = str(Path(path).resolve())
    from garmexport.settings.config import OutputConfig
    from garmexport.storage.open import open_storage
    from garmexport.storage.options import from_output
    from tests.hdfs_cluster import HdfsUnavailable, hadoop_jars, launcher_classes, mini_hdfs

    try:  # before the broker: fetched or compiled once, and what is missing said at once
        launcher_classes(hadoop_jars())
    except HdfsUnavailable as exc:
        print(f"bench_hdfs: no HDFS here, nothing run: {exc}")
        return 0
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-hdfs-"))
    work.mkdir(parents=True, exist_ok=True)
    topic = "garmadon"
    broker = None
    try:
        broker = start_with_topic(work, topic, args.partitions)
        print(f"producing {args.events} events to {broker.bootstrap} (not timed)", flush=True)
        produced = produce_events(broker.bootstrap, topic, args.events, args.partitions,
                                  args.days, bad_share=args.bad_share)
        n = produced["total"]
        started = time.monotonic()
        with mini_hdfs(datanodes=args.datanodes) as cluster:
            print(f"MiniHdfs up in {time.monotonic() - started:.0f} s "
                  f"(NameNode HTTP {cluster.http_ports[0]})", flush=True)
            cluster.mkdir(BASE, HDFS_USER)
            jvm = CpuTrace(cluster.proc.pid)
            hdfs_options = from_output(OutputConfig(hdfs_user=HDFS_USER))
            measured: dict[str, list[dict]] = {}
            try:
                for attempt in range(args.repeat):
                    for name in runs:
                        base, _, tag = name.partition("+")
                        group = f"bench-{name}-{attempt}"
                        label = f"{name.replace('+', '-')}-{attempt}"
                        storage = None
                        if base == "local":
                            root = str(work / f"out-{label}")
                            extra = {}
                        else:
                            root = cluster.webhdfs_uri(f"{BASE}/out-{label}")
                            extra = {"GARMEXPORT_OUTPUT_HDFS_USER": HDFS_USER}
                            storage = open_storage(root, "bench", hdfs_options)
                        if tag:
                            extra[CHECKOUT_VAR] = roots.get(tag, str(ROOT))
                        env = exporter_env(broker.bootstrap, topic, group, root, **extra)
                        print(f"run {attempt + 1}/{args.repeat}: {name} "
                              f"(load {os.getloadavg()[0]:.1f})", flush=True)
                        try:
                            raw = run_once(label, env, n, args.partitions, work, cluster, jvm,
                                           storage)
                        finally:
                            if storage is not None:
                                storage.close()
                        measured.setdefault(name, []).append(
                            {**row_of(raw, n, produced["value_bytes"]), "nn_raw": raw["nn"]})
                        if base == "local":
                            shutil.rmtree(root, ignore_errors=True)
            finally:
                jvm.stop()
        rows = {name: median_row(values) for name, values in measured.items()}
        ratios = print_table(rows, produced, n)
        result = {"events": n, "value_bytes": produced["value_bytes"],
                  "partitions": args.partitions, "days": args.days,
                  "bad_share": args.bad_share, "repeat": args.repeat,
                  "datanodes": args.datanodes, "cpus": os.cpu_count(),
                  "loadavg_at_end": os.getloadavg(), "runs": rows, "all_runs": measured,
                  "ratios": ratios}
        out_path = Path(args.json_out)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(result, indent=2))
        print(f"\nwrote {out_path}")
    except HdfsUnavailable as exc:
        print(f"bench_hdfs: HDFS did not start, nothing measured: {exc}")
    finally:
        if broker is not None:
            broker.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    main()
    raise SystemExit(0)
