"""CPU-seconds of one ``/metrics`` scrape of an instance: its supervisor and every reader.

``python tests/bench/bench_scrape.py [--partitions 128] [--readers 2] [--scrapes 9]
[--churn] [--root CHECKOUT] [--json-out FILE]``

Not a test: what one Prometheus scrape of a busy instance costs, to compare two versions
(``--root``: run the processes on another checkout's ``garmexport``, e.g. one before a
change, back to back with this one). The situation is the README's: ``--partitions``
partitions spread over ``--readers`` reader processes (partition p on reader p mod
readers), every exported type (18) present in every partition, writers open. Each reader
is a process of its own that builds the exporter's :class:`Metrics` on a fresh registry
and makes the calls a reader makes for that state (assignment, consumption and lag of
each partition with records waiting, so the lag in seconds is aged at each scrape; a
marker and the low watermark of every type; a committed file and already-committed
events for every (type, partition); publishes, quarantines, recovery, rebalances, open
writers), then serves them with the exporter's own server (``observe.health.serve``) on
a loopback port, as a reader does. The supervisor is a process of its own too, serving
the instance's ``/metrics`` as ``garmexport.instance.supervisor`` builds it (its
reader probe on the readers' port files, the merge of their expositions).

Each scrape is a GET of the supervisor's ``/metrics`` from this process, which does not
count: what is measured is the CPU time (user + system, ``time.process_time`` of the
process, so every thread) that the supervisor and the readers spend, asked of each
process over its stdin just before and just after the GET. With ``--churn``, every
(type, partition) value and every lag changes before each scrape (the work is not
counted), so nothing the scrape could cache is still valid: a catch-up's worst case.
It prints the exposition's size and series, the median CPU-s per scrape (total,
supervisor, readers) with min and max, and the wall time of the GET; checks that the
prometheus_client text parser reads the exposition and that the partition gauges of the
dashboard are there for every (type, partition), and runs ``promtool check metrics`` on
it when promtool is installed (its lint findings are printed, not fatal). Exits 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()
CHECKOUT = HERE.parents[2]
#: the checkout whose garmexport this process imports: this one, or a child's --root
ROOT_ENV = "BENCH_SCRAPE_ROOT"
sys.path.insert(0, os.environ.get(ROOT_ENV, str(CHECKOUT)))

WALL_S = 1_795_300_000.0  # the readers' wall clock: the lag in seconds is aged from it
TOPIC = "garmadon"


def _reader(name: str, index: int, readers: int, partitions: int, port_file: str) -> None:
    """A reader's metrics in the bench's state, served as a reader serves them; then
    answers ``cpu`` (its CPU seconds) and ``churn`` (change every value) on stdin."""
    from prometheus_client import CollectorRegistry

    from garmexport.observe.health import Health, serve, write_port_file
    from garmexport.observe.metrics import Metrics
    from garmexport.wire.events import EXPORTED

    types = [t.output for t in EXPORTED if t.output is not None]
    mine = list(range(index, partitions, readers))
    registry = CollectorRegistry()
    metrics = Metrics.create(registry, wall_s=lambda: WALL_S)
    health = Health(live_timeout_s=30, metrics=metrics)
    metrics.rebalance("assign")
    metrics.recovered("start", 0.2)
    metrics.recovered("assign", 0.4)
    for p in mine:
        metrics.assign_partition(TOPIC, p)
    health.set_assignment(len(mine))
    metrics.set_partitions(len(mine), 0)

    def state(step: int) -> None:
        for p in mine:
            base = 1_000_000 * (p + 1) + 10_000 * step
            metrics.consumed(TOPIC, p, 8_192)
            metrics.set_lag(TOPIC, p, base + 9_000, base)
            metrics.set_lag_time(TOPIC, p, True, int((WALL_S - 120 - step) * 1000))
            metrics.marker_written(p, heartbeat=step % 2 == 1)
            for t, type_ in enumerate(types):
                metrics.set_watermark(type_, p, base + t - 1)
                metrics.committed(type_, p, base + t, WALL_S - 60 + step + t / 10)
                metrics.already_committed(type_, p, 17)
        for type_ in types:
            metrics.exported(type_, 8_192 * len(mine))
            metrics.published(type_, "data", 8_192, 1_500_000, 0.03 + step / 1000)
            metrics.quarantined(type_, "bad_body", 1)
        metrics.published(types[0], "quarantine", 3, 900, 0.01)
        metrics.store_call("put")
        metrics.store_call("list")
        # writers open: one file per (type, partition), one day
        n = len(types) * len(mine)
        metrics.set_writers(n, n, 180_000 * n, 42.0 + step)

    state(0)
    health.tick(time.monotonic())
    server = serve("127.0.0.1", 0, registry, health)
    write_port_file(port_file, server.port)
    step = 0
    for line in sys.stdin:
        command = line.strip()
        if command == "churn":
            step += 1
            state(step)
        print(f"{command} {time.process_time():.9f}", flush=True)
    server.close()


def _supervisor(port_files: dict[str, str], port_file: str) -> None:
    """The instance's metrics server as the supervisor builds it; answers ``cpu`` on stdin."""
    from prometheus_client import CollectorRegistry

    from garmexport.observe.health import Health, serve, write_port_file
    from garmexport.observe.reader_probe import ReaderProbe

    probe = ReaderProbe(port_files)
    try:  # the supervisor's own builder, where the checkout has one
        from garmexport.instance.supervisor import instance_metrics
    except ImportError:  # before it: what run_supervisor did inline
        from garmexport.observe.metrics_merge import ReadersCollector

        def instance_metrics(probe: ReaderProbe) -> CollectorRegistry:
            registry = CollectorRegistry()
            registry.register(ReadersCollector(probe))
            return registry

    server = serve("127.0.0.1", 0, instance_metrics(probe), Health(live_timeout_s=30))
    write_port_file(port_file, server.port)
    import garmexport

    for line in sys.stdin:
        command = line.strip()
        if command == "where":  # the checkout it runs
            print(f"where {Path(garmexport.__file__).resolve().parents[1]}", flush=True)
            continue
        print(f"{command} {time.process_time():.9f}", flush=True)
    server.close()


class Child:
    """One process of the bench, driven over its stdin."""

    def __init__(self, name: str, argv: list[str], root: Path) -> None:
        # the script runs from this checkout, its garmexport from ``root``
        env = {**os.environ, "PYTHONPATH": str(root), ROOT_ENV: str(root)}
        self.name = name
        self.process = subprocess.Popen(  # noqa: S603 - this script, our interpreter
            [sys.executable, str(HERE), *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env, text=True, cwd=str(root))

    def ask(self, command: str) -> float:
        """Send ``command``; the process's CPU seconds when it answered."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().split()
        if len(answer) != 2 or answer[0] != command:
            raise RuntimeError(f"{self.name} answered {answer!r} to {command!r}")
        return float(answer[1])

    def where(self) -> str:
        """The checkout whose garmexport the process imported (the supervisor answers)."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write("where\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().split(" ", 1)[1].strip()

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _wait_port(path: Path, what: str, timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not serve within {timeout_s:g}s")


def check(text: str, partitions: int) -> dict:
    """The exposition parses, and the dashboard's (type, partition) gauges are all there."""
    from prometheus_client.parser import text_string_to_metric_families

    from garmexport.wire.events import EXPORTED

    types = {t.output for t in EXPORTED if t.output is not None}
    series = 0
    pairs: dict[str, set] = {}
    for family in text_string_to_metric_families(text):
        series += len(family.samples)
        if family.name in ("garmexport_committed_offset", "garmexport_low_watermark_offset"):
            pairs[family.name] = {(s.labels["type"], s.labels["partition"]) for s in family.samples}
    want = {(t, str(p)) for t in types for p in range(partitions)}
    for name in ("garmexport_committed_offset", "garmexport_low_watermark_offset"):
        if pairs.get(name) != want:
            raise AssertionError(f"{name}: {len(pairs.get(name, ()))} (type, partition) series, "
                                 f"not the {len(want)} expected")
    return {"series": series, "bytes": len(text.encode())}


def promtool(text: str) -> str:
    tool = shutil.which("promtool")
    if tool is None:
        return "promtool not installed"
    done = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=60, check=False)
    findings = (done.stdout + done.stderr).strip().splitlines()
    return f"exit {done.returncode}, {len(findings)} findings" + (
        ": " + "; ".join(sorted(set(f.split(" ", 1)[-1] for f in findings))[:5]) if findings else "")


def run(args: argparse.Namespace) -> dict:
    root = Path(args.root).resolve()
    workdir = Path(tempfile.mkdtemp(prefix="bench-scrape-"))
    children: list[Child] = []
    try:
        port_files = {f"r{i}": str(workdir / f"r{i}.port") for i in range(args.readers)}
        readers = [Child(name, ["--as-reader", name, "--index", str(i), "--readers",
                                str(args.readers), "--partitions", str(args.partitions),
                                "--port-file", path], root)
                   for i, (name, path) in enumerate(port_files.items())]
        children += readers
        for name, path in port_files.items():
            _wait_port(Path(path), name)
        sup_port_file = workdir / "supervisor.port"
        supervisor = Child("supervisor", ["--as-supervisor", "--port-file", str(sup_port_file),
                                          "--reader-ports", json.dumps(port_files)], root)
        children.append(supervisor)
        url = f"http://127.0.0.1:{_wait_port(sup_port_file, 'supervisor')}/metrics"

        def scrape() -> str:
            with urllib.request.urlopen(url, timeout=30) as answer:
                return answer.read().decode()

        imported = supervisor.where()
        if Path(imported) != root:
            raise RuntimeError(f"the processes import garmexport from {imported}, not {root}")
        text = scrape()  # a first scrape: imports, caches, connections warm
        shape = check(text, args.partitions)
        rows = []
        for _ in range(args.scrapes):
            if args.churn:
                for reader in readers:
                    reader.ask("churn")
            time.sleep(0.2)  # the servers' threads settle
            before = [c.ask("cpu") for c in children]
            start = time.monotonic()
            text = scrape()
            wall_s = time.monotonic() - start
            after = [c.ask("cpu") for c in children]
            spent = [b - a for a, b in zip(before, after)]
            rows.append({"total": sum(spent), "supervisor": spent[-1],
                         "readers": sum(spent[:-1]), "wall": wall_s})
        check(text, args.partitions)
        result = {"partitions": args.partitions, "readers": args.readers, "churn": args.churn,
                  "root": str(root), "scrapes": args.scrapes, **shape,
                  "promtool": promtool(text) if not args.no_promtool else "not run"}
        for key in ("total", "supervisor", "readers", "wall"):
            values = [r[key] for r in rows]
            result[key] = {"median": statistics.median(values), "min": min(values),
                           "max": max(values)}
        return result
    finally:
        for child in reversed(children):
            child.close()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=128, help="partitions (128)")
    parser.add_argument("--readers", type=int, default=2,
                        help="reader processes (2: actors.parallelism on this machine's 2 cores)")
    parser.add_argument("--scrapes", type=int, default=9, help="timed scrapes; medians (9)")
    parser.add_argument("--churn", action="store_true",
                        help="change every value before each scrape (a catch-up's worst case)")
    parser.add_argument("--root", default=str(CHECKOUT),
                        help="checkout whose garmexport the processes run (this one)")
    parser.add_argument("--no-promtool", action="store_true", help="skip promtool check metrics")
    parser.add_argument("--json-out", help="also write the result here as JSON")
    # the bench's own processes
    parser.add_argument("--as-reader", help=argparse.SUPPRESS)
    parser.add_argument("--as-supervisor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--port-file", help=argparse.SUPPRESS)
    parser.add_argument("--reader-ports", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.as_reader:
        _reader(args.as_reader, args.index, args.readers, args.partitions, args.port_file)
        return 0
    if args.as_supervisor:
        _supervisor(json.loads(args.reader_ports), args.port_file)
        return 0

    result = run(args)
    print(f"/metrics of {args.partitions} partitions x 18 types on {args.readers} readers "
          f"({'every value changed before each scrape' if args.churn else 'values unchanged'}), "
          f"checkout {result['root']}: {result['series']} series, {result['bytes'] / 1e6:.2f} MB; "
          f"promtool: {result['promtool']}")
    for key in ("total", "supervisor", "readers"):
        r = result[key]
        print(f"{key:>11}: median {r['median']:.4f} CPU-s per scrape "
              f"(min {r['min']:.4f}, max {r['max']:.4f}, {args.scrapes} scrapes)")
    r = result["wall"]
    print(f"{'GET':>11}: median {r['median']:.4f} s wall (min {r['min']:.4f}, max {r['max']:.4f})")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
