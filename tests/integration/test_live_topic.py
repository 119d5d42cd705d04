"""``verify`` and ``repair`` (gaps) on a topic that records keep arriving at, an exporter
running: they read the topic up to its end as their read began, finish, and are exact.

A topic of 2 partitions is exported by an exporter that keeps running; then its largest
data file and a quarantine file of records with a good head (a bad header or body, which
the writer quarantines on the Kafka day) are deleted, and a feed of 600 records/s per
partition starts. While it runs: ``verify`` must finish (before, it waited for an end of
partition that never came while records flowed, and timed out), name exactly the deleted
rows as missing, the quarantine's in ``_quarantine/day=D`` (issue 40, item 2), and
nothing unexpected, though the exporter publishes rows all along and the topic has
records past the end it read; the dry run must plan the same rows into the same places;
``repair --apply`` must fill them once; and ``verify`` then finds nothing missing, with the
exporter's unpublished tail in flight.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow.parquet as pq

from garmexport.cli.produce import client_settings, produce as produce_records
from garmexport.settings.load import load_config
from garmexport.testbed.generator import Spec
from tests.integration.harness import (
    NOW_MS, PYTHON, ROOT, Exporter, exporter_env, exporter_runs, produce, repair, topic_ends,
    wait_caught_up,
)

RATE = 600  # records/s per partition
#: a few types, so that the exporter's small files (2 s old at most) stay few
MIX = {"FS_EVENT": 4, "GC_EVENT": 2, "CONTAINER_MONITORING_EVENT": 2, "PATH_EVENT": 0.2}
#: the topic's read takes a second or two here, ten under a loaded suite: only an end
#: that never comes (the read before issue 40) reaches this
TIMEOUT_S = "60"


def _verify(env: Mapping[str, str]) -> tuple[int, dict, float]:
    started = time.monotonic()
    done = subprocess.run([PYTHON, "-m", "garmexport", "verify", "--json", "--timeout-s",
                           TIMEOUT_S], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    took = time.monotonic() - started
    try:
        return done.returncode, json.loads(done.stdout), took
    except ValueError:
        raise AssertionError(f"verify printed no report (exit {done.returncode}, {took:.1f} s):"
                             f"\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}") from None


@contextlib.contextmanager
def _feed(bootstrap: str, topic: str) -> Iterator[dict]:
    """Records at ``RATE`` per partition (2 partitions) until the block ends; the report."""
    stop, report = threading.Event(), {}
    spec = Spec(now_ms=NOW_MS, seed=41, partitions=2, days=2, bad_share=0.03, mix=MIX)
    settings = client_settings(load_config(None, {}), bootstrap)
    thread = threading.Thread(target=lambda: report.update(produce_records(
        settings, topic, spec, 2 * RATE * 120, rate=2 * RATE, stop=stop)), daemon=True)
    thread.start()
    try:
        yield report
    finally:
        stop.set()
        thread.join(30)


def _good_head_quarantine(root: Path) -> tuple[Path, int]:
    """The quarantine file with the most records the writer quarantined for their header or
    body (a file of a type's origin, not of ``_frame``), and how many rows it holds."""
    best: tuple[int, Path] | None = None
    for path in root.glob("_quarantine/day=*/*.parquet"):
        if path.name.endswith("+_frame.parquet"):
            continue
        reasons = pq.read_table(path, columns=["reason"]).column(0).to_pylist()
        decoded = sum(r in ("bad_body", "bad_header") for r in reasons)
        if decoded == len(reasons) and (best is None or decoded > best[0]):
            best = (decoded, path)
    assert best is not None, "no quarantine file of bad bodies: produce more bad records"
    return best[1], best[0]


def test_verify_and_repair_finish_on_a_live_topic_and_are_exact(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, 6_000, partitions=2, seed=40, days=2, bad_share=0.03,
            mix=MIX)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root))
    with exporter_runs() as runs:
        runs.append(Exporter(env, tmp_path, "live"))
        wait_caught_up(str(root), topic, topic_ends(broker.bootstrap, topic), 90,
                       runs[0].check_alive)
        data = list(root.glob("[!_]*/day=*/*.parquet"))
        victim = max(data, key=lambda p: pq.read_metadata(p).num_rows)
        quarantined, bad_rows = _good_head_quarantine(root)
        rows = pq.read_metadata(victim).num_rows
        dataset, day, q_day = victim.parts[-3], victim.parts[-2], quarantined.parts[-2]
        victim.unlink()
        quarantined.unlink()

        with _feed(broker.bootstrap, topic) as fed:
            time.sleep(2)  # the feed and the exporter's publishing under way
            code, report, took = _verify(env)
            print(f"verify took {took:.1f} s")
            parts = report["partitions"]
            assert code == 1, json.dumps(report, indent=1)[-3000:]
            assert sum(r["missing"] for r in parts.values()) == rows + bad_rows, parts
            assert sum(r["unexpected"] for r in parts.values()) == 0, parts
            assert sum(r["duplicates"] for r in parts.values()) == 0, parts
            places = {(g["dataset"], g["day"]) for r in parts.values() for g in r["gaps"]}
            assert places == {(dataset, day.removeprefix("day=")),
                              ("_quarantine", q_day.removeprefix("day="))}, places
            ends = {int(p): r["end"] for p, r in parts.items()}

            dry = repair(env, "--timeout-s", TIMEOUT_S)
            print(dry.stdout)
            assert dry.returncode == 1, dry.stdout + dry.stderr
            assert f"{dataset}/{day}: would add {rows} rows" in dry.stdout, dry.stdout
            assert f"_quarantine/{q_day}: would add {bad_rows} rows" in dry.stdout, dry.stdout
            assert re.search(r"dry run: would add \d+ rows in 2 \(dataset, day\) pairs",
                             dry.stdout), dry.stdout
            assert "read up to its end as the read began: partition 0 at " in dry.stdout

            applied = repair(env, "--apply", "--timeout-s", TIMEOUT_S)
            print(applied.stdout)
            assert applied.returncode == 0, applied.stdout + applied.stderr
            assert f"repair: added {rows + bad_rows} rows" in applied.stdout, applied.stdout
            assert "; 0 not added" in applied.stdout and "0 lost for good" in applied.stdout

            code, report, took = _verify(env)
            print(f"verify took {took:.1f} s")
            parts = report["partitions"]
            assert code == 0 and report["ok"], json.dumps(report, indent=1)[-3000:]
            assert all(r["missing"] == r["duplicates"] == r["unexpected"] == 0
                       for r in parts.values()), parts
            # the feed went on past both reads: each stopped at its end, not at the topic's
            later = {int(p): r["end"] for p, r in parts.items()}
            assert all(later[p] > ends[p] for p in ends), (ends, later)
            runs[0].check_alive()
    print(f"fed {fed['delivered']} records in {fed['seconds']} s "
          f"({fed['delivered'] / fed['seconds'] / 2:.0f} per partition per second)")
