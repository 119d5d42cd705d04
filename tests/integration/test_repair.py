"""``garmexport repair`` fills a deleted file's records from the broker, exactly once.

A small topic (2 partitions, 4,000 records, a few bad ones) is exported and the exporter
stopped; then the largest data file and one quarantine file are deleted, and 200 records
more produced. ``verify`` must name the gap; a dry run must print the plan (the new records
in flight, left to the exporter), exit 1 and write nothing. Then, while two exporters
run and records keep arriving, ``repair --apply`` is killed right after its first publish (the
exporter's own crash point), SIGKILLed at a random point, and run again; once the
exporters have caught up, ``verify`` against the broker must find every record exactly once,
and records in flight alone (produced after they stopped) leave repair nothing to do: exit 0,
as its ``--help`` says.
"""

from __future__ import annotations

import os
import random
import re
import signal
from pathlib import Path

import pyarrow.parquet as pq

from tests.integration.harness import (
    Exporter, assert_exact, export_all_exactly_once, exporter_env, exporter_runs, files_under,
    produce, produce_in_background, repair, repair_sigkilled, stop_caught_up, verify,
)

#: the random kill's delay; TEST_REPAIR_SEED replays another
SEED = int(os.environ.get("TEST_REPAIR_SEED", "33"))


def test_repair_fills_a_deleted_file_once_across_a_kill(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, 4_000, partitions=2, seed=33, days=2, bad_share=0.01)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root))
    export_all_exactly_once(env, tmp_path, "export")

    data = [p for p in root.glob("[!_]*/day=*/*.parquet")]
    victim = max(data, key=lambda p: pq.read_metadata(p).num_rows)
    quarantined = sorted(root.glob("_quarantine/day=*/*.parquet"))
    assert quarantined, "no quarantine file: produce more bad records"
    gone = {victim: pq.read_metadata(victim).num_rows,
            quarantined[0]: pq.read_metadata(quarantined[0]).num_rows}
    for path in gone:
        path.unlink()
    dataset, day = victim.parts[-3], victim.parts[-2]

    code, report = verify(env)
    assert code == 1
    gaps = [g["what"] for r in report["partitions"].values() for g in r["gaps"]]
    assert any(f"{dataset}/{day}" in g for g in gaps), gaps
    assert sum(r["missing"] for r in report["partitions"].values()) == sum(gone.values())

    # records past the committed point (no exporter ran since) are the exporter's
    produce(broker.bootstrap, topic, 200, partitions=2, seed=34, days=2)
    before = files_under(root)
    dry = repair(env)
    print(dry.stdout)
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert f"{dataset}/{day}: would add {gone[victim]} rows" in dry.stdout, dry.stdout
    assert "_quarantine/day=" in dry.stdout and "run with --apply" in dry.stdout, dry.stdout
    assert "missing records in flight (offsets 2" in dry.stdout and "; 0 in flight" not in dry.stdout
    assert files_under(root) == before, "a dry run wrote something"
    assert re.search(r"; took \d+\.\d s\n$", dry.stdout), dry.stdout  # the last line

    # two exporters run and records arrive meanwhile: repair fills below the committed
    # point only, the exporters write the rest
    rng = random.Random(SEED)
    print(f"seed {SEED} (TEST_REPAIR_SEED replays another)")
    with exporter_runs() as runs:
        runs += [Exporter(env, tmp_path, "live-a"), Exporter(env, tmp_path, "live-b")]
        for run in runs:
            run.wait_event("assigned", timeout_s=90)
        feed, _ = produce_in_background(broker.bootstrap, topic, 1_000, partitions=2, seed=35,
                                        days=2, rate=500)
        # three files at least (the victim's rows cut in halves, the quarantine's): the
        # first kill, after the first publish, leaves two
        small = {"GARMEXPORT_WRITER_MAX_FILE_ROWS": str(max(1, gone[victim] // 2))}
        killed = repair(env, "--apply",
                        extra={**small, "TEST_GARMEXPORT_CRASH_AFTER": "publish:1"})
        assert killed.returncode == 137, killed.stdout + killed.stderr
        # then a real SIGKILL at a random point: right after the next publish or a little
        # later (the run may have ended by then)
        code, out = repair_sigkilled({**env, **small}, 1, rng.uniform(0.0, 0.2))
        assert code in (0, -signal.SIGKILL), out
        again = repair(env, "--apply", extra=small)
        print(killed.stdout, out, again.stdout, sep="")
        assert again.returncode == 0, again.stdout + again.stderr
        added = int(re.search(r"repair: added (\d+) rows", again.stdout)[1])  # type: ignore[index]
        assert added < sum(gone.values()), again.stdout  # the killed runs' files stay
        assert "0 not added" in again.stdout and "0 lost for good" in again.stdout
        feed.join(60)
        ends = stop_caught_up(runs, broker.bootstrap, topic, root)
    assert_exact(env, ends)  # every record exactly once: no duplicate, none missing

    # records in flight only (produced after the exporters stopped): nothing for repair to
    # fix, so exit 0, as its --help says (issue 40: the help listed them under exit 1)
    produce(broker.bootstrap, topic, 200, partitions=2, seed=36, days=2)
    flight = repair(env)
    assert flight.returncode == 0, flight.stdout + flight.stderr
    assert re.search(r"would add 0 rows .*; [1-9]\d* in flight, left to the exporter; 0 lost",
                     flight.stdout), flight.stdout
    shown = repair(env, "--help")
    assert shown.returncode == 0, shown.stderr
    exits = re.search(r"exit status: 0 (.*); 1 (.*); 2 configuration error",
                      " ".join(shown.stdout.split()))
    assert exits and "in flight" in exits[1] and "in flight" not in exits[2], shown.stdout
