"""garmexport takes over a root the Garmadon JVM exporter wrote: nothing lost, nothing twice.

The topic is produced in two eras. The JVM era (a mix without ``flink_kafka_consumer``, so
that type is one the JVM exporter never wrote) is read back from the broker and written
the JVM way by ``tests/jvm_root.py`` up to a different cut in each partition, in the middle
of a day: ``index=`` files of several row groups, heartbeat rows, ``.done`` checkpoints,
the oldest day under old ``<p>.<offset>`` names in a bare ``D`` directory, an empty type
directory, and a file of another Kafka cluster tag (offsets far above ours, which must not
move any resume point). Then garmexport runs on that root: two instances in one group,
SIGKILLs at random moments, restarts, a last instance that catches up. ``garmexport
verify`` must find every record of the topic in exactly one data row across the JVM files
and garmexport's, heartbeat rows counted apart.

A second test takes the root over ahead of time with ``garmexport offsets set --from-jvm``,
outside the consumer group: ``offsets`` shows the same resume points before and after, and
the exporters that follow read markers only, with the same exactly-once result.

A third test switches while the JVM exporter still writes: it merges rows into the
newest file of a day after garmexport took over. The next garmexport start refuses,
naming the file, rather than export those records twice (docs/jvm-takeover.md,
"While the JVM exporter still runs").
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from garmexport.cli.produce import client_settings, produce as produce_records
from garmexport.protocol.naming import day_name
from garmexport.settings.load import load_config
from garmexport.kafka.topic_scan import scan
from garmexport.testbed.generator import DEFAULT_MIX, Spec
from tests.integration.harness import (
    NOW_MS, PYTHON, ROOT, Exporter, assert_exact, exporter_env, exporter_runs, produce, topic_ends,
    wait_caught_up,
)
from tests.jvm_root import Rec, build, generated, heartbeat_rows, write_jvm_file

JVM_ERA = 24_000
GARMEXPORT_ERA = 16_000
DAY_MS = 86_400_000
NEVER_IN_JVM = "flink_kafka_consumer"


def read_topic(bootstrap: str, topic: str) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}

    def on_records(p: int, records: list) -> None:
        out.setdefault(p, []).extend(Rec(m.offset(), m.value(), m.timestamp()[1]) for m in records)

    scan({"bootstrap.servers": bootstrap, "fetch.queue.backoff.ms": 10}, topic, on_records,
         timeout_s=120)
    return out


def jvm_era(broker, partitions: int) -> tuple[str, dict[int, list[Rec]]]:
    """A topic with the JVM era produced; its records per partition."""
    topic = broker.new_topic(partitions=partitions)
    mix = {k: v for k, v in DEFAULT_MIX.items() if k != "FLINK_KAFKA_CONSUMER_EVENT"}
    # ends late in a day: NOW_MS (10:00 UTC) - 1.5 days is 22:00 UTC
    spec = Spec(now_ms=NOW_MS - DAY_MS * 3 // 2, seed=3, partitions=partitions, days=3,
                late_share=0.1, mix=mix)
    report = produce_records(client_settings(load_config(None, {}), broker.bootstrap), topic,
                             spec, JVM_ERA)
    assert report["failed"] == 0, report
    return topic, read_topic(broker.bootstrap, topic)


def test_every_record_is_in_one_data_row_across_jvm_and_garmexport_files_after_kills(
        broker, tmp_path: Path) -> None:
    topic, era = jvm_era(broker, 4)
    # the JVM exporter stopped at a different point of each partition
    cut = {p: recs[: int(len(recs) * (0.7 + 0.1 * p))] for p, recs in era.items()}
    oldest = min(r.kafka_ms for recs in era.values() for r in recs) // DAY_MS
    root = tmp_path / "out"
    built = build(root, cut, rows_per_file=250, groups_per_file=3, heartbeat_every=400,
                  old_name_day=day_name(oldest), skip_origins=[NEVER_IN_JVM])
    assert sum(map(len, built.heartbeats.values())) > 20
    assert any(f.parent.name == day_name(oldest) for f in built.files)
    fs_file = next(f for f in built.files if f.parts[-3] == "fs")
    foreign = pq.read_table(fs_file)
    foreign = foreign.set_column(foreign.schema.get_field_index("kafka_offset"), "kafka_offset",
                                 pa.compute.add(foreign.column("kafka_offset"), 10**9))
    write_jvm_file(root / "fs" / "day=2019-06-01" / "0.cluster=old.index=1", [foreign])

    produce(broker.bootstrap, topic, GARMEXPORT_ERA, partitions=4, seed=9, days=2,
            late_share=0.1)
    ends = topic_ends(broker.bootstrap, topic)
    assert sum(ends.values()) == JVM_ERA + GARMEXPORT_ERA

    env = exporter_env(broker.bootstrap, topic, str(root), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, SOURCE_POLL_MAX_RECORDS=300,
                       WRITER_DECODE_BATCH_RECORDS=100, KAFKA_SESSION_TIMEOUT_MS=2000)
    with exporter_runs() as runs:
        offsets = subprocess.run([PYTHON, "-m", "garmexport", "offsets", "--json"], env=env,
                                 cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert offsets.returncode == 0, offsets.stderr[-2000:]
        shown = {r["partition"]: r for r in json.loads(offsets.stdout)["partitions"]}
        for p in range(4):
            for origin, got in shown[p]["jvm"].items():
                assert got["offset"] == built.high(origin, p), (p, origin, got)
                assert (root / got["file"]).exists()
            assert shown[p]["seek"] == min(built.high(o, p) for o in shown[p]["jvm"]) + 1
            assert NEVER_IN_JVM not in shown[p]["jvm"]

        rng = random.Random(22)
        for i in range(3):
            pair = [Exporter(env, tmp_path, f"pair{i}-{k}") for k in range(2)]
            runs += pair
            for run in pair:
                run.wait_event("assigned", timeout_s=90)
            with contextlib.suppress(subprocess.TimeoutExpired):
                pair[0].process.wait(timeout=rng.uniform(0.5, 2.5))
            for run in pair:
                run.kill()
        takeovers = [e for run in runs for e in run.events("jvm_takeover")]
        assert takeovers, "no run recorded a takeover"
        final = Exporter(env, tmp_path, "final")
        runs.append(final)
        final.wait_event("assigned", timeout_s=90)
        wait_caught_up(str(root), topic, ends, timeout_s=300, alive=final.check_alive)
        assert final.terminate() == 0, final.tail()

        report = assert_exact(env, ends)
        assert report["jvm_files"] == len(built.files)
        assert report["foreign_jvm_files"] == ["fs/day=2019-06-01/0.cluster=old.index=1"]
        for p, r in report["partitions"].items():
            want_beats = sum(len(v) for (o, pp), v in built.heartbeats.items() if pp == int(p))
            assert r["heartbeat_rows"] == want_beats
            assert r["jvm_rows"] == sum(len(v) for (o, pp), v in built.data.items() if pp == int(p))
            assert 0 < r["jvm_rows"] < r["rows"]
        # the JVM files are untouched
        assert all(f.exists() for f in built.files)


def test_the_offsets_step_takes_over_outside_the_group_and_the_exporters_read_only_markers(
        broker, tmp_path: Path) -> None:
    topic, era = jvm_era(broker, 3)
    cut = {p: recs[: int(len(recs) * (0.6 + 0.1 * p))] for p, recs in era.items()}
    root = tmp_path / "out"
    built = build(root, cut, rows_per_file=250, groups_per_file=2, heartbeat_every=400,
                  skip_origins=[NEVER_IN_JVM])
    produce(broker.bootstrap, topic, 6_000, partitions=3, seed=11, days=2, late_share=0.1)
    ends = topic_ends(broker.bootstrap, topic)
    env = exporter_env(broker.bootstrap, topic, str(root), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, SOURCE_POLL_MAX_RECORDS=300)

    def offsets(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([PYTHON, "-m", "garmexport", "offsets", *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    def resume_points() -> dict[int, tuple[int, dict]]:
        shown = json.loads(offsets("--json").stdout)["partitions"]
        return {r["partition"]: (r["seek"], r["low"]) for r in shown}

    before = resume_points()
    for p in range(3):
        assert before[p][1] == {o: built.high(o, p) for o in before[p][1]}
        assert before[p][0] == min(before[p][1].values()) + 1 and NEVER_IN_JVM not in before[p][1]
    step = offsets("set", "--from-jvm", "--all-partitions").stdout
    for p in range(3):
        assert f"partition {p}: seek {before[p][0]}, " in step, step
        pdir = root / "_offsets" / f"local+{topic}" / f"{p:05d}"
        assert (pdir / "j+takeover.json").exists()
        assert [f.name for f in pdir.iterdir() if f.name.startswith("m+jvm-takeover-")]
    assert step.count(": written") == 3, step
    assert resume_points() == before
    again = offsets("set", "--from-jvm", "--all-partitions").stdout
    assert again.count(": has markers") == 3, again

    with exporter_runs() as runs:
        first = Exporter(env, tmp_path, "after-step")
        runs.append(first)
        first.wait_event("assigned", timeout_s=90)
        with contextlib.suppress(subprocess.TimeoutExpired):
            first.process.wait(timeout=random.Random(7).uniform(1.0, 2.5))
        first.kill()
        final = Exporter(env, tmp_path, "final")
        runs.append(final)
        final.wait_event("assigned", timeout_s=90)
        wait_caught_up(str(root), topic, ends, timeout_s=300, alive=final.check_alive)
        assert final.terminate() == 0, final.tail()
        for run in runs:  # no footer scan, before the join nor in the assignment
            assert not run.events("jvm_takeover_scan") and not run.events("jvm_takeover"), \
                run.tail()
        report = assert_exact(env, ends)
        assert report["jvm_files"] == len(built.files)
        assert all(f.exists() for f in built.files)


def test_a_start_after_the_jvm_exporter_merged_more_rows_into_its_newest_file_is_refused(
        broker, tmp_path: Path) -> None:
    topic, era = jvm_era(broker, 2)
    switch = {p: recs[: len(recs) // 2] for p, recs in era.items()}
    root = tmp_path / "out"
    built = build(root, switch, rows_per_file=250)
    env = exporter_env(broker.bootstrap, topic, str(root))
    with exporter_runs() as runs:
        first = Exporter(env, tmp_path, "switch")
        runs.append(first)
        first.wait_event("jvm_takeover", timeout_s=90)
        first.wait_event("assigned", timeout_s=90)
        # taken over before the group join (``max.poll.interval.ms`` does not bound it)
        assert first.events("jvm_takeover_scanned"), first.tail()
        assert first.terminate() == 0, first.tail()

        # the JVM exporter, still running, appends its next rows to the newest file of the
        # day it was writing (a merge: the file is rewritten under its own name)
        p = 0
        newest = max((f for f in built.files if f.parts[-3] == "fs" and f.name.startswith(f"{p}.")),
                     key=lambda f: (f.parent.name, int(f.name.split("=")[-1])))
        table = pq.read_table(newest)
        write_jvm_file(newest, [table, heartbeat_rows(table.schema.remove_metadata(),
                                                      [len(switch[p]) + 5], [NOW_MS])])

        second = Exporter(env, tmp_path, "after-merge")
        runs.append(second)
        code = second.process.wait(timeout=120)
        assert code != 0, second.tail()
        text = second.log_path.read_text()
        rel = "/".join(newest.parts[-3:])
        assert "JVM exporter wrote" in text and newest.name in text and rel.split("/")[0] in text, \
            second.tail()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_start_on_a_topic_not_created_yet_warns_of_a_deferred_takeover_only_on_a_jvm_root(
        broker, tmp_path: Path, parallelism: int) -> None:
    """Every start on a topic that does not exist yet warned ``jvm_takeover_deferred``,
    though a new root holds nothing to take over (issue 32, item 8): the warning is for a
    root with the JVM exporter's files, whose takeover then waits for the assignment."""
    topic = f"not-yet-{parallelism}-{uuid.uuid4().hex[:8]}"  # never created
    jvm_root = tmp_path / "jvm"
    build(jvm_root, generated(300, partitions=1, days=1))
    for root, warns in ((tmp_path / "new", False), (jvm_root, True)):
        env = exporter_env(broker.bootstrap, topic, str(root), ACTORS_PARALLELISM=parallelism,
                           SOURCE_GROUP_ID=f"{topic}-{root.name}")
        with exporter_runs() as runs:
            run = Exporter(env, tmp_path, f"{root.name}-{parallelism}")
            runs.append(run)
            run.wait_event("starting", timeout_s=60)  # after the takeover, on both paths
            assert run.terminate() == 0, run.tail()
        said = [e for e in run.events() if e["event"] == "jvm_takeover_deferred"]
        assert bool(said) == warns, run.tail()
        if warns:
            assert said[0]["level"] == "WARNING" and topic in said[0]["error"], said
