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

A second test proves ``repair duplicates`` on a day with duplicates: a JVM exporter that
kept running after the takeover merged the records after the takeover point into the newest
file of a closed day of one (type, partition), up to where it stopped, and garmexport had
exported them too (docs/jvm-takeover.md, "While the JVM exporter still runs"). With the same
two exporters running, ``verify`` names both sides of each, the dry run plans garmexport's
copies out, and ``repair duplicates --apply`` is killed at seeded steps of its swap
(compaction's crash hook) and by a real SIGKILL at a seeded moment while it holds the lease,
and run again until it exits 0. The JVM file is left as it was; ``verify`` against the
broker exits 0 and every offset is in exactly one row, counted as above.

The seed is printed: set ``TEST_REPAIR_JVM_SEED`` to replay another one.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pyarrow.parquet as pq

from garmexport.cli.produce import client_settings, produce as produce_records
from garmexport.compaction.lease import lease_name, parse_lease
from garmexport.compaction.names import LEASE_DIR
from garmexport.compaction.swap import STEPS
from garmexport.process.crash_hooks import CRASH_ENV as SWAP_CRASH_ENV
from garmexport.pipeline.router import classify
from garmexport.protocol.naming import FileName
from garmexport.settings.load import load_config
from garmexport.testbed.generator import Spec
from tests.broker import Broker
from tests.integration.harness import (
    NOW_MS, Exporter, all_alive, assert_exact, exporter_env, exporter_runs,
    produce, produce_in_background, repair, repair_sigkilled, stop_caught_up, topic_ends, verify, wait_caught_up,
)
from tests.integration.test_jvm_takeover import read_topic
from tests.jvm_root import WINDOW, Rec, build, decoded_chains, exported_chains, write_jvm_file

SEED = int(os.environ.get("TEST_REPAIR_JVM_SEED", "20261203"))
DAY_MS = 86_400_000
JVM_ERA = 3_000
MAX_FILE_ROWS = 3  # repair's files: small, so that a run publishes many and can die between
#: how repair --apply dies, each once, in a seeded order: the exporter's crash hook right
#: after the n-th intent or publish, or a SIGKILL a moment after its n-th published file
KILLS = ("intent", "publish", "sigkill")
RUNS = len(KILLS) + 3  # the kills, then reruns until one exits 0


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

        dry = repair(env, extra=small)
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
                code, out = repair_sigkilled({**env, **small}, n, rng.uniform(0.0, 0.05))
            else:
                crash = {} if how == "none" else {"TEST_GARMEXPORT_CRASH_AFTER": f"{how}:{n}"}
                done = repair(env, "--apply", extra={**small, **crash})
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
        ends = stop_caught_up(runs, broker.bootstrap, topic, root)

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


#: the swap's crash points a repair reaches with no metastore (no view, so no flip and no
#: grace: compaction.swap.STEPS), in the order it reaches them
SWAP_STEPS = STEPS[:6]
SWAP_KILLS = 3  # of them, in step order: each fires unless a run before it ended the swap
#: the exporters' files: small, so that a (type, day, partition) has several
EXPORTER_FILE_ROWS = 20
LEASE_TAKEN = '"event": "compaction_lease_taken"'  # the log line of a run holding the lease


def _age_a_dead_lease(root: Path) -> bool:
    """A killed repair leaves the root's compaction lease live until ``LEASE_S`` (20 s)
    after its last renewal, and the next run waits that long. The run is dead (reaped), so
    the test ages the lease instead of waiting: it writes the next lease file already
    expired, as a release does. True if there was a live one."""
    leases = {k: json.loads(f.read_text()) for f in (root / LEASE_DIR).glob("*.json")
              if (k := parse_lease(f.name)) is not None}
    if not leases or leases[max(leases)]["expires_at_ms"] <= time.time() * 1000:
        return False
    (root / LEASE_DIR / lease_name(max(leases) + 1)).write_text(
        json.dumps({"owner": "test: a killed repair's lease, aged", "expires_at_ms": 0}))
    return True


def _garmexport_rows(root: Path) -> dict[tuple[str, str, int], dict[Path, list[int]]]:
    """(type, day, partition) -> garmexport's raw files there -> their offsets."""
    out: dict[tuple[str, str, int], dict[Path, list[int]]] = {}
    for path in root.glob("[!_]*/day=*/*.parquet"):
        name = FileName.parse(path.name)
        if name is not None:
            offsets = pq.read_table(path, columns=["kafka_offset"]).column(0).to_pylist()
            key = (path.parts[-3], path.parts[-2][len("day="):], name.partition)
            out.setdefault(key, {})[path] = sorted(offsets)
    return out


def test_repair_duplicates_keeps_a_jvm_file_rewritten_after_the_takeover_across_kills(
        broker: Broker, tmp_path: Path) -> None:
    """The Garmadon JVM exporter kept running after garmexport took the root over: it merged
    the records after the takeover point into the newest file of a day, which garmexport had
    exported too (docs/jvm-takeover.md, "While the JVM exporter still runs"). ``repair
    duplicates --apply``, killed at seeded random points beside two exporters, keeps the JVM
    copy (a JVM file is never rewritten) and takes garmexport's copies out."""
    print(f"seed {SEED} (TEST_REPAIR_JVM_SEED replays another)")
    rng = random.Random(SEED + 1)
    topic, era = _jvm_era(broker)
    cut = {p: recs[: int(len(recs) * (0.8 + 0.1 * p))] for p, recs in era.items()}
    root = tmp_path / "out"
    built = build(root, cut, rows_per_file=150, groups_per_file=2, heartbeat_every=300)
    # the garmexport era runs to NOW_MS (2026-11-03 10:00 in Kafka time): the markers'
    # progress is then past the end of every JVM day (the JVM era ends on 2026-11-01 at
    # 22:00), so with no lateness every such day is closed and its raw files at or below
    # W may be rewritten
    produce(broker.bootstrap, topic, 1_000, partitions=2, seed=SEED % 1000 + 1, days=2)
    env = exporter_env(broker.bootstrap, topic, str(root), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, SOURCE_POLL_MAX_RECORDS=300,
                       COMPACTION_LATENESS_S=0, WRITER_MAX_FILE_ROWS=EXPORTER_FILE_ROWS)
    with exporter_runs() as runs:
        runs += [Exporter(env, tmp_path, f"live{k}") for k in range(2)]
        for run in runs:  # each takes the root over before it joins the group
            run.wait_event("assigned", timeout_s=90)
        wait_caught_up(str(root), topic, topic_ends(broker.bootstrap, topic), 120,
                       all_alive(runs))

        # The JVM exporter, still running, merged into the newest file of a day of one
        # (type, partition) the records garmexport exported after the takeover point, up
        # to where it stopped: inside one of garmexport's files, so that file is only
        # partly doubled (rewritten less those rows) and the ones before it wholly (taken
        # out). Rewritten now, while the exporters run: they check the JVM files at start
        # only, and are not restarted (a start would refuse: the file changed).
        ours = _garmexport_rows(root)

        def splits(files: Mapping[Path, list[int]]) -> list[Path]:
            """The files that can be the partly doubled one: more than one row, after
            another file."""
            return sorted(f for f, o in files.items() if len(o) > 1
                          and any(other[-1] < o[0] for other in files.values()))

        chains = sorted(k for k, files in ours.items() if splits(files)
                        and list((root / k[0] / f"day={k[1]}").glob(f"{k[2]}.index=*")))
        assert chains, {k: [len(o) for o in files.values()] for k, files in ours.items()}
        origin, day, p = rng.choice(chains)
        files = ours[(origin, day, p)]
        split = rng.choice(splits(files))
        upto = rng.choice(files[split][:-1])
        doubled = sorted(o for offsets in files.values() for o in offsets if o <= upto)
        newest = max((root / origin / f"day={day}").glob(f"{p}.index=*"),
                     key=lambda f: int(f.name.rpartition("=")[2]))
        records = [r for r in read_topic(broker.bootstrap, topic)[p] if r.offset in doubled]
        [(rows, _)] = decoded_chains({p: records}).values()
        old = pq.read_table(newest)
        write_jvm_file(newest, [old, rows.cast(old.schema.remove_metadata())])
        merged = newest.read_bytes()
        print(f"{newest.relative_to(root)}: {old.num_rows} rows, merged {len(doubled)} more "
              f"(offsets {doubled[0]}..{upto}) out of garmexport's {len(files)} files there")

        code, report = verify(env)
        assert code == 1, report
        dup = {int(q): r["duplicates"] for q, r in report["partitions"].items()}
        assert dup == {q: len(doubled) if q == p else 0 for q in dup}, report
        assert not any(r["missing"] for r in report["partitions"].values()), report
        jvm_rel = "/".join(newest.relative_to(root).parts)
        taken = sorted(f for f, o in files.items() if o[0] <= upto)
        groups = report["partitions"][str(p)]["duplicate_files"]  # both sides named
        assert {f for g in groups for f in g["files"]} == \
            {jvm_rel} | {"/".join(f.relative_to(root).parts) for f in taken}, groups
        assert all(len(g["files"]) == 2 and jvm_rel in g["files"] for g in groups), groups
        assert sum(g["count"] for g in groups) == len(doubled), groups

        dry = repair(env, "duplicates")
        print(dry.stdout)
        assert dry.returncode == 1, dry.stdout + dry.stderr
        assert (f"{origin}/day={day}: would take out {len(doubled)} rows from {len(taken)} "
                "files (" + ", ".join(f.name for f in taken) + ")") in dry.stdout, dry.stdout
        # none left twice: garmexport's files there may be rewritten (at or below W, the
        # day closed), the JVM file may not
        assert "; 0 records left twice; 0 problems (run with --apply)" in dry.stdout

        # kills at seeded swap steps (the crash hook, like a SIGKILL), in step order, and
        # a real SIGKILL at a seeded moment of a run, in a seeded place among them
        kills: list[str] = sorted(rng.sample(SWAP_STEPS, SWAP_KILLS), key=SWAP_STEPS.index)
        kills.insert(rng.randint(0, len(kills)), "sigkill")
        feed, _ = produce_in_background(broker.bootstrap, topic, 600, partitions=2,
                                        seed=SEED % 1000 + 2, days=2, rate=100)
        outputs: list[str] = []
        codes: list[int] = []
        for attempt in range(len(kills) + 3):
            how = kills[attempt] if attempt < len(kills) else "none"
            if how == "sigkill":  # while it holds the lease: recovering, reading the
                delay = rng.uniform(0.0, 0.3)  # output (about 0.5 s here), planning
                how = f"SIGKILL {delay:.2f} s after it took the lease"
                code, out = repair_sigkilled(env, 1, delay, ("duplicates", "--apply"),
                                              lambda line: LEASE_TAKEN in line)
            else:
                crash = {} if how == "none" else {SWAP_CRASH_ENV: how}
                done = repair(env, "duplicates", "--apply", extra=crash)
                code, out = done.returncode, done.stdout + done.stderr
            aged = code != 0 and _age_a_dead_lease(root)
            outputs.append(f"--- run {attempt}: {how}: exit {code}"
                           f"{' (its lease aged)' if aged else ''}\n{out}")
            codes.append(code)
            if code == 0:
                break
        print("".join(outputs))
        assert codes[-1] == 0, "".join(outputs[-2:])
        assert codes[0] in (137, -signal.SIGKILL), codes  # the first kill always lands
        assert set(codes[:-1]) <= {137, -signal.SIGKILL}, codes
        assert re.search(r"repair duplicates: took out \d+ rows, updated 0; files \d+ -> \d+ "
                         r"in \d+ swaps \(waited 0 s for the grace(; \d+ left by an earlier run)?\); "
                         r"0 records left twice; "
                         r"0 problems", outputs[-1]), outputs[-1]
        assert newest.read_bytes() == merged, "the repair rewrote a JVM file"
        assert not list((root / "_compaction").rglob("g*.json")), "a swap left unfinished"

        feed.join(60)
        assert not feed.is_alive(), "the background producer did not finish"
        ends = stop_caught_up(runs, broker.bootstrap, topic, root)

    report = assert_exact(env, ends)  # verify exits 0: no duplicate, nothing missing
    for q, r in report["partitions"].items():
        assert r["jvm_rows"] == sum(len(v) for (_, s), v in built.data.items()
                                    if s == int(q)) + (len(doubled) if int(q) == p else 0)
        assert r["heartbeat_rows"] == sum(len(v) for (_, s), v in built.heartbeats.items()
                                          if s == int(q))
    assert all(f.exists() for f in built.files)
    left: set[int] = set()  # what garmexport's files of the day (raw or compacted) hold of partition p
    for path in (root / origin / f"day={day}").glob("*.parquet"):
        t = pq.read_table(path, columns=["kafka_partition", "kafka_offset"]).to_pydict()
        left |= {o for q, o in zip(t["kafka_partition"], t["kafka_offset"]) if q == p}
    assert left and not left & set(doubled), "the JVM copy is not the one kept"
    topic_records = read_topic(broker.bootstrap, topic)
    wanted = {(q, r.offset) for q, recs in topic_records.items() for r in recs
              if classify(r.value, r.kafka_ms, WINDOW)[0]}
    rows_seen = _rows_per_offset(root, built.heartbeats)
    twice = sorted(k for k, count in rows_seen.items() if count > 1)
    assert not twice, f"{len(twice)} offsets in more than one row: {twice[:10]}"
    assert rows_seen.keys() == wanted, (sorted(wanted - rows_seen.keys())[:10],
                                        sorted(rows_seen.keys() - wanted)[:10])
