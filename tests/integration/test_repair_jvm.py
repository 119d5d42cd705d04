"""``garmexport repair`` fills the records a Garmadon JVM exporter lost, exactly once.

The JVM era of a small topic (2 partitions, 3 days, many late events) is read back from
the broker and written the JVM way by ``tests/jvm_root.py``, up to a different cut in each
partition, in the middle of a day, except a seeded share of the late events of the older
days near the cut: the rows of the day files that were still open when the JVM exporter
crashed. Each lost record lies below the highest offset the JVM wrote for its type, so the
takeover resumes above it and no exporter will ever write it: a gap only ``repair`` fills.
More records follow the era.

Two exporters (one consumer group) take the root over and export the rest while records
keep arriving. Meanwhile a dry run must plan exactly the lost records, then ``repair
--apply`` is killed at seeded random points, by the exporter's own crash hook (right after
the n-th intent or publish) or by a real SIGKILL a moment after its n-th published file,
and run again until it exits 0. Once both exporters have caught up, ``garmexport verify``
against the broker must exit 0 with the JVM files, their rows and heartbeat rows all
counted, and every (partition, offset) of an exported type or the quarantine must be in
exactly one row, counted once more here from every file of the root, the JVM's included.
The seed is printed: set ``TEST_REPAIR_JVM_SEED`` to replay another one.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pyarrow.parquet as pq

from garmexport.cli.produce import client_settings, produce as produce_records
from garmexport.pipeline.router import classify
from garmexport.settings.load import load_config
from garmexport.tools.generator import Spec
from tests.broker import Broker
from tests.integration.harness import (
    NOW_MS, PYTHON, ROOT, Exporter, assert_exact, exporter_env, exporter_runs, produce,
    produce_in_background, topic_ends, wait_caught_up,
)
from tests.integration.test_jvm_takeover import read_topic
from tests.jvm_root import WINDOW, Rec, build, exported_chains

SEED = int(os.environ.get("TEST_REPAIR_JVM_SEED", "20261203"))
DAY_MS = 86_400_000
JVM_ERA = 3_000
MAX_FILE_ROWS = 3  # repair's files: small, so that a run publishes many and can die between
#: how repair --apply dies, each once, in a seeded order: the exporter's crash hook right
#: after the n-th intent or publish, or a SIGKILL a moment after its n-th published file
KILLS = ("intent", "publish", "sigkill")
RUNS = len(KILLS) + 3  # the kills, then reruns until one exits 0


def _repair(env: Mapping[str, str], *args: str, extra: Mapping[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "garmexport", "repair", *args],
                          env={**env, **(extra or {})}, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def _repair_sigkilled(env: Mapping[str, str], after: int, delay_s: float) -> tuple[int, str]:
    """``repair --apply``, SIGKILLed ``delay_s`` after its ``after``-th published file (or
    its exit, if it ends first): (exit code, output)."""
    proc = subprocess.Popen([PYTHON, "-m", "garmexport", "repair", "--apply"], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    lines, published = [], 0
    try:
        while published < after:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            published += line.startswith("published ")
        time.sleep(delay_s)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(lines) + rest


def _jvm_era(broker: Broker) -> tuple[str, dict[int, list[Rec]]]:
    """A topic with the JVM era produced (3 days to 22:00 UTC); its records per partition."""
    topic = broker.new_topic(partitions=2)
    spec = Spec(now_ms=NOW_MS - DAY_MS * 3 // 2, seed=SEED % 1000, partitions=2, days=3,
                late_share=0.2)
    report = produce_records(client_settings(load_config(None, {}), broker.bootstrap), topic,
                             spec, JVM_ERA)
    assert report["failed"] == 0, report
    return topic, read_topic(broker.bootstrap, topic)


def _lose(cut: Mapping[int, list[Rec]], rng: random.Random) -> tuple[dict[int, list[Rec]], int]:
    """The records the JVM exporter wrote, and how many it lost: about half of the events
    of an older day among the last 40 % of each partition's records, each below a later
    record of its type (so below what the takeover resumes after)."""
    chains = exported_chains(cut)
    newest: dict[int, str] = {}
    high: dict[tuple[str, int], int] = {}
    for (origin, day, p), recs in chains.items():
        newest[p] = max(newest.get(p, day), day)
        high[(origin, p)] = max(high.get((origin, p), -1), recs[-1].offset)
    lost: set[tuple[int, int]] = set()
    for (origin, day, p), recs in chains.items():
        tail = cut[p][int(len(cut[p]) * 0.6)].offset
        lost |= {(p, r.offset) for r in recs if day < newest[p] and tail <= r.offset
                 < high[(origin, p)] and rng.random() < 0.5}
    kept = {p: [r for r in recs if (p, r.offset) not in lost] for p, recs in cut.items()}
    return kept, len(lost)


def _rows_per_offset(root: Path, beats: Mapping[tuple[str, int], list[int]]
                     ) -> Counter[tuple[int, int]]:
    """(partition, offset) of every row a reader of the root sees: garmexport's files and
    the quarantine by their columns, a JVM file by the partition in its name, less the
    heartbeat rows ``beats`` (offsets per (type, partition)) written into the JVM files."""
    rows: Counter[tuple[int, int]] = Counter()
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if (path.is_dir() or rel[-1].startswith((".", "_"))
                or (rel[0].startswith("_") and rel[0] != "_quarantine")):
            continue
        if path.suffix == ".parquet":
            table = pq.read_table(path, columns=["kafka_partition", "kafka_offset"])
            rows.update(zip(table.column("kafka_partition").to_pylist(),
                            table.column("kafka_offset").to_pylist()))
        else:  # the JVM exporter's <p>[.cluster=<c>].index=<n>
            p = int(rel[-1].split(".")[0])
            rows.update((p, o) for o in pq.read_table(path, columns=["kafka_offset"])
                        .column("kafka_offset").to_pylist())
    rows.subtract((p, o) for (_, p), offsets in beats.items() for o in offsets)
    assert min(rows.values()) >= 0, "a heartbeat row written is not in the root"
    return +rows


def test_repair_fills_what_the_jvm_exporter_lost_across_kills_beside_two_exporters(
        broker: Broker, tmp_path: Path) -> None:
    print(f"seed {SEED} (TEST_REPAIR_JVM_SEED replays another)")
    rng = random.Random(SEED)
    topic, era = _jvm_era(broker)
    cut = {p: recs[: int(len(recs) * (0.8 + 0.1 * p))] for p, recs in era.items()}
    written, lost = _lose(cut, rng)
    assert lost > 40, f"only {lost} records lost: produce more late events"
    root = tmp_path / "out"
    built = build(root, written, rows_per_file=150, groups_per_file=2, heartbeat_every=300)
    produce(broker.bootstrap, topic, 1_000, partitions=2, seed=SEED % 1000 + 1, days=2)

    env = exporter_env(broker.bootstrap, topic, str(root), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, SOURCE_POLL_MAX_RECORDS=300)
    small = {"GARMEXPORT_WRITER_MAX_FILE_ROWS": str(MAX_FILE_ROWS)}
    with exporter_runs() as runs:
        runs += [Exporter(env, tmp_path, f"live{k}") for k in range(2)]
        for run in runs:  # each takes the root over before it joins the group
            run.wait_event("assigned", timeout_s=90)
        feed, _ = produce_in_background(broker.bootstrap, topic, 1_000, partitions=2,
                                        seed=SEED % 1000 + 2, days=2, rate=100)

        dry = _repair(env, extra=small)
        print(dry.stdout)
        assert dry.returncode == 1, dry.stdout + dry.stderr
        assert f"repair: dry run: would add {lost} rows" in dry.stdout, dry.stdout
        assert "; 0 lost for good; 0 problems" in dry.stdout, dry.stdout

        # a crash point within the first 1/(len(KILLS) + 1) of the files the plan publishes
        budget = max(1, -(-lost // MAX_FILE_ROWS) // (len(KILLS) + 1))
        kills = rng.sample(KILLS, len(KILLS))
        outputs, codes = [], []
        for attempt in range(RUNS):
            how = kills[attempt] if attempt < len(kills) else "none"
            n = rng.randint(1, budget)
            if how == "sigkill":
                code, out = _repair_sigkilled({**env, **small}, n, rng.uniform(0.0, 0.05))
            else:
                crash = {} if how == "none" else {"TEST_GARMEXPORT_CRASH_AFTER": f"{how}:{n}"}
                done = _repair(env, "--apply", extra={**small, **crash})
                code, out = done.returncode, done.stdout + done.stderr
                if how != "none" and code != 137:  # the hook did not fire: fewer files left
                    files = re.search(r"repair: added \d+ rows in (\d+) files", out)
                    assert code == 0 and files and int(files[1]) < n, out
            outputs.append(f"--- run {attempt}: {how} {n}: exit {code}\n{out}")
            codes.append(code)
            if code == 0:
                break
        print("".join(outputs))
        assert codes[-1] == 0, "".join(outputs[-2:])
        assert any(c in (137, -signal.SIGKILL) for c in codes), codes
        assert re.search(r"; 0 not added; \d+ in flight, left to the exporter; 0 lost for "
                         r"good; 0 problems", outputs[-1]), outputs[-1]

        feed.join(60)
        assert not feed.is_alive(), "the background producer did not finish"
        ends = topic_ends(broker.bootstrap, topic)

        def alive() -> None:
            for run in runs:
                run.check_alive()

        wait_caught_up(str(root), topic, ends, 120, alive)
        for run in runs:
            assert run.terminate() == 0, run.tail()

    report = assert_exact(env, ends)  # verify exits 0: no duplicate, nothing missing
    assert report["jvm_files"] == len(built.files) and report["foreign_jvm_files"] == []
    for p, r in report["partitions"].items():
        assert r["jvm_rows"] == sum(len(v) for (_, q), v in built.data.items() if q == int(p))
        assert r["heartbeat_rows"] == sum(len(v) for (_, q), v in built.heartbeats.items()
                                          if q == int(p))
    assert all(f.exists() for f in built.files)  # the JVM files are untouched

    topic_records = read_topic(broker.bootstrap, topic)
    wanted = {(p, r.offset) for p, recs in topic_records.items() for r in recs
              if classify(r.value, r.kafka_ms, WINDOW)[0]}
    assert sum(map(len, topic_records.values())) == sum(ends.values())
    rows = _rows_per_offset(root, built.heartbeats)
    twice = sorted(k for k, count in rows.items() if count > 1)
    assert not twice, f"{len(twice)} offsets in more than one row: {twice[:10]}"
    assert rows.keys() == wanted, (sorted(wanted - rows.keys())[:10],
                                   sorted(rows.keys() - wanted)[:10])
