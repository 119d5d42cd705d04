"""``garmexport repair duplicates`` and ``repair quarantine``: rows taken out exactly once.

Duplicates: a topic is exported, then a day is given the copy a backup restore leaves (a
compacted file holding the rows of its largest raw file, with its sidecar). ``verify``
names the duplicates; the dry run prints the plan, exits 1 and writes nothing; then, while
two exporters run and records arrive, ``repair duplicates --apply`` is killed right after
its commit point (compaction's own crash point) and run again: the second run finishes
the first one's swap and finds nothing left. ``verify`` against the broker must then find
every record exactly once.

Quarantine: a topic is exported by a "version" that does not know one event type (the
router's test hook), so every record of that type is quarantined as an unknown marker.
``repair quarantine --apply``, run with today's code while two exporters of today's code
run and records arrive, is killed after its first publish into the dataset, SIGKILLed at
a random point, and run again:
every record of that type in the closed days ends in its dataset, none stays in the
quarantine, the other quarantined records (bad frames) stay, and ``verify`` finds every
record exactly once. A metastore that does not answer stops a swap before it changes
anything.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from garmexport.compaction.names import CompactedName
from garmexport.compaction.plan import Range
from garmexport.compaction.scan import ranges_to_json
from garmexport.pipeline.crash_points import CRASH_ENV, PREDATED_ENV
from garmexport.protocol.naming import MS_PER_DAY, FileName, day_number
from garmexport.testbed.generator import Spec, generate
from garmexport.wire.frames import HEAD_SIZE, encode
from garmexport.wire.quarantine import quarantine_table
from tests.spark.exporter_like import markers_for, write_day
from tests.integration.harness import (
    NOW_MS, Exporter, assert_exact, export_all_exactly_once, exporter_env, exporter_runs,
    files_under, produce, produce_in_background, repair, repair_sigkilled, stop_caught_up,
    topic_ends, verify,
)


#: the records produced while a repair runs reach Kafka after the first ones (their Kafka
#: times from NOW_MS on): the days the repair works on stay closed (compaction.lateness_s 0)
LATER_MS = NOW_MS + MS_PER_DAY
DAY = "2026-11-01"
#: the random kill's delay; TEST_REPAIR_SEED replays another
SEED = int(os.environ.get("TEST_REPAIR_SEED", "43"))
CLOSED_MS = (day_number(DAY) + 1) * MS_PER_DAY + 3_600_000  # the markers' progress: past DAY


def _restore_a_backup(root: Path) -> tuple[Path, int]:
    """Give the day of the largest raw file a compacted file holding its rows, as a backup
    of an older compaction restored beside the day leaves; its path and rows."""
    raw = [p for p in root.glob("[!_]*/day=*/*.parquet") if FileName.parse(p.name)]
    victim = max(raw, key=lambda p: pq.read_metadata(p).num_rows)
    first = FileName.parse(victim.name)
    assert first is not None
    table = pq.read_table(victim).replace_schema_metadata(None)
    name = CompactedName(first.source, first.topic, 1, 0)
    pq.write_table(table, victim.parent / name.format())
    offs = table.column("kafka_offset").to_pylist()
    (victim.parent / name.sidecar()).write_text(ranges_to_json(
        (Range(first.partition, min(offs), max(offs), len(offs)),), source=first.source,
        topic=first.topic, generation=1, rows=len(offs)))
    return victim.parent / name.format(), len(offs)


def test_repair_duplicates_takes_a_restored_copy_out_once_across_a_kill(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, 3_000, partitions=2, seed=41, days=2)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), COMPACTION_LATENESS_S=0)
    export_all_exactly_once(env, tmp_path, "export")
    copy, rows = _restore_a_backup(root)

    code, report = verify(env)
    assert code == 1
    assert sum(r["duplicates"] for r in report["partitions"].values()) == rows

    before = files_under(root)
    dry = repair(env, "duplicates")
    print(dry.stdout)
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert f"would take out {rows} rows from 1 files ({copy.name})" in dry.stdout, dry.stdout
    assert files_under(root) == before, "a dry run wrote something"

    with exporter_runs() as runs:
        _two_exporters(runs, env, tmp_path)
        feed, _ = produce_in_background(broker.bootstrap, topic, 1_000, partitions=2, seed=42,
                                        days=1, rate=500, now_ms=LATER_MS)
        killed = repair(env, "duplicates", "--apply", extra={CRASH_ENV: "after-journal"})
        assert killed.returncode == 137, killed.stdout + killed.stderr
        assert copy.exists(), "the kill came before the swap touched the day"
        again = repair(env, "duplicates", "--apply")
        print(killed.stdout, again.stdout, sep="")
        assert again.returncode == 0, again.stdout + again.stderr
        # no grace without a metastore: the killed run's swap is rolled forward at once
        assert "finished 1 swaps an earlier run left" in again.stdout, again.stdout
        assert "took out 0 rows" in again.stdout and "1 left by an earlier run" in again.stdout
        assert "0 records left twice" in again.stdout
        assert not copy.exists()
        feed.join(60)
        stop_caught_up(runs, broker.bootstrap, topic, root)
    assert_exact(env, topic_ends(broker.bootstrap, topic))


def _two_exporters(runs: list[Exporter], env: dict[str, str], log_dir: Path) -> None:
    """Two exporters of one group, each with a partition: the repair runs beside both."""
    runs += [Exporter(env, log_dir, "live-a"), Exporter(env, log_dir, "live-b")]
    for run in runs:
        run.wait_event("assigned", timeout_s=90)


def test_repair_quarantine_moves_an_upgraded_type_into_its_dataset_once(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, 3_000, partitions=2, seed=43, days=2, bad_share=0.01)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), COMPACTION_LATENESS_S=0)
    old = {**env, PREDATED_ENV: "container_event"}
    export_all_exactly_once(old, tmp_path, "old-version")
    assert not list(root.glob("container_event/day=*/*.parquet"))
    # the newest day is not closed (the partitions' progress is in it): its quarantine
    # files are not rewritten, so the replay is asked for the days before it
    days = sorted(d.name[len("day="):] for d in (root / "_quarantine").glob("day=*"))
    chosen = [a for d in days[:-1] for a in ("--day", d)]
    assert chosen, days

    def container_rows(day: str) -> int:
        t = pq.read_table(root / "_quarantine" / f"day={day}").to_pydict()
        return sum(d.startswith("unknown type marker 4001") for d in t["detail"])

    moved = sum(container_rows(d) for d in days[:-1])
    assert moved > 10, "too few container events to move"
    staying = container_rows(days[-1])
    # asked before the exporters start: once they read the later records below, the markers'
    # progress passes the newest day and it closes too
    every_day = repair(env, "quarantine")  # the newest day's rows must wait
    assert every_day.returncode == 1, every_day.stdout + every_day.stderr
    newest = pq.read_table(root / "_quarantine" / f"day={days[-1]}").num_rows
    assert f"; {newest} left for a later run: day {days[-1]} is not closed" in \
        every_day.stdout, every_day.stdout

    # the upgrade: two exporters that know the type run, and records keep arriving
    with exporter_runs() as runs:
        _two_exporters(runs, env, tmp_path)
        feed, _ = produce_in_background(broker.bootstrap, topic, 1_000, partitions=2, seed=44,
                                        days=1, rate=500, now_ms=LATER_MS)
        dry = repair(env, "quarantine", *chosen)
        print(dry.stdout)
        assert dry.returncode == 1, dry.stdout + dry.stderr
        assert f"would publish {moved} records into their datasets" in dry.stdout, dry.stdout
        assert "rows from the quarantine: partition " in dry.stdout, dry.stdout  # per day

        killed = repair(env, "quarantine", "--apply", *chosen,
                        extra={CRASH_ENV: "publish:1"})
        assert killed.returncode == 137, killed.stdout + killed.stderr
        # a real SIGKILL at a random point: after the next publish, or in the swap that
        # takes the quarantine's copies out, or once it ended
        code, out = repair_sigkilled(env, 1, random.Random(SEED).uniform(0.0, 0.5),
                                     ("quarantine", "--apply", *chosen))
        assert code in (0, -signal.SIGKILL), out
        again = repair(env, "quarantine", "--apply", *chosen)
        print(killed.stdout, out, again.stdout, sep="")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "0 records left twice" in again.stdout, again.stdout
        feed.join(60)
        stop_caught_up(runs, broker.bootstrap, topic, root)

    assert [container_rows(d) for d in days] == [0] * (len(days) - 1) + [staying]
    assert pq.read_table(root / "container_event").num_rows >= moved
    assert_exact(env, topic_ends(broker.bootstrap, topic))


def test_repair_duplicates_with_the_metastore_down_changes_nothing(tmp_path: Path) -> None:
    """A swap with a metastore flips the day's partition: with the metastore down, repair
    must say so and change nothing, not commit a swap it cannot flip. Without a metastore
    it swaps plainly; a file garmexport did not name is the copy kept."""
    root = tmp_path / "out"
    write_day(str(root), "gc", DAY, partitions=1, files_per_partition=3, rows_per_file=3)
    markers_for(str(root), {0: {"gc": 10_000}}, CLOSED_MS)
    day = root / "gc" / f"day={DAY}"
    first = sorted(day.iterdir())[0]
    (day / "restored.parquet").write_bytes(first.read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith("GARMEXPORT_")}
    env |= {"GARMEXPORT_OUTPUT_ROOT": str(root), "GARMEXPORT_COMPACTION_LATENESS_S": "0"}
    before = files_under(root)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # a port nothing listens on
        down = repair({**env, "GARMEXPORT_HIVE_METASTORE_URI":
                        f"thrift://127.0.0.1:{closed.getsockname()[1]}"}, "duplicates", "--apply")
    assert down.returncode == 1, down.stdout + down.stderr
    assert "repair changed nothing: start the metastore" in down.stderr, down.stderr
    assert files_under(root) == before

    plain = repair(env, "duplicates", "--apply")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert f"took out 3 rows from 1 files ({first.name})" in plain.stdout, plain.stdout
    assert re.search(r"; 0 problems; took \d+\.\d s\n$", plain.stdout), plain.stdout
    assert not first.exists() and (day / "restored.parquet").exists()
    assert repair(env, "duplicates").returncode == 0  # nothing left
    typo = repair(env, "duplicates", "--day", DAY, "--day", "2026-12-01")
    assert typo.returncode == 0, typo.stdout + typo.stderr
    assert "--day 2026-12-01: no file of the output is of this day" in typo.stdout, typo.stdout
    assert f"--day {DAY}:" not in typo.stdout, typo.stdout


def _quarantined_by_an_older_version(root: Path) -> tuple[int, int]:
    """A quarantine file an older version left: container events it did not know
    (``unknown_marker``), and one whose body no version can read, also recorded as an
    unknown marker then. Returns the offsets of the unreadable one and the count of the
    others."""
    noon = day_number(DAY) * MS_PER_DAY + 12 * 3_600_000
    spec = Spec(now_ms=noon, seed=7, partitions=1, days=0.5, late_share=0.0,
                mix={"CONTAINER_EVENT": 1.0})
    values = [r.value for r in generate(spec, 12)]
    marker, ts, header_len, _ = struct.unpack_from(">iqii", values[0])
    header = values[0][HEAD_SIZE:HEAD_SIZE + header_len]
    values.append(encode(marker, ts, header, b"\x0a\xff"))  # a length past the body's end
    n = len(values)
    table = quarantine_table("garmadon", 0, "_frame", list(range(10, 10 + n)), [noon] * n,
                             [None] * n, values, ["unknown_marker"] * n,
                             [f"unknown type marker {marker}"] * n)
    day = root / "_quarantine" / f"day={DAY}"
    day.mkdir(parents=True)
    pq.write_table(table, day / FileName("local", "garmadon", 0, 10, "_frame").format())
    return 10 + n - 1, n - 1


def test_repair_quarantine_rewrites_a_changed_reason_and_leaves_the_failing_row(
        tmp_path: Path) -> None:
    """The replay's three outcomes on one file, no broker needed: records that decode now
    go to their dataset, a record that still fails stays with its new reason (its row is
    rewritten), and a second run finds nothing to do."""
    root = tmp_path / "out"
    markers_for(str(root), {0: {"_frame": 10_000}}, CLOSED_MS)
    bad, good = _quarantined_by_an_older_version(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GARMEXPORT_")}
    env |= {"GARMEXPORT_OUTPUT_ROOT": str(root), "GARMEXPORT_COMPACTION_LATENESS_S": "0"}
    done = repair(env, "quarantine", "--apply")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"published {good} records" in done.stdout, done.stdout
    assert "1 still fail (1 with a new reason)" in done.stdout, done.stdout
    left = pq.read_table(root / "_quarantine").to_pylist()
    assert [(r["kafka_offset"], r["origin"], r["reason"]) for r in left] == \
        [(bad, "container_event", "bad_body")]
    assert pq.read_table(root / "container_event").num_rows == good
    again = repair(env, "quarantine", "--apply")
    assert again.returncode == 0 and "took out 0 rows" in again.stdout, again.stdout
