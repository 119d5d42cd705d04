"""Exactly once the hard way: one exporter process, killed again and again, restarted.

300k generated records (4 partitions, several days, late events, rare types, every kind of
bad record) are produced once. The exporter is then killed at chosen points (right after a
file is published, before any marker knows it; right after a marker is written, before
older markers and intents are deleted), stopped once with SIGTERM in mid-stream, killed at
random moments (SIGKILL after a seeded random delay), restarted each time, and finally
left to catch up and stopped with SIGTERM.
``garmexport verify`` must then find every record exactly once.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import time
from pathlib import Path

from tests.integration.harness import (
    Exporter, assert_exact, committed_upto, exporter_env, exporter_runs, foreign_visible_files,
    produce, topic_ends, wait_caught_up,
)

RECORDS = 300_000
RANDOM_KILLS = 6
SEED = 20261103


def test_every_record_lands_exactly_once_across_sigkills_at_chosen_and_random_points(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=4)
    report = produce(broker.bootstrap, topic, RECORDS, partitions=4, seed=7, days=4,
                     late_share=0.1, bad_share=0.005)
    assert len(report["bad"]) == 7 and report["types"]["FLINK_KAFKA_CONSUMER_EVENT"] > 0
    ends = topic_ends(broker.bootstrap, topic)
    assert sum(ends.values()) == RECORDS
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1,
                       # small polls and decode batches slow the export down (300k records
                       # took 6 s with decode batches of 8192, 12 s with 100) so that the
                       # kills hit it at work, and make more files, so more steps to land in
                       SOURCE_POLL_MAX_RECORDS=500, WRITER_DECODE_BATCH_RECORDS=100,
                       KAFKA_SESSION_TIMEOUT_MS=2000)
    with exporter_runs() as runs:
        def start(name: str, crash: str | None = None) -> Exporter:
            extra = {"TEST_GARMEXPORT_CRASH_AFTER": crash} if crash else None
            runs.append(Exporter(env, tmp_path, name, extra))
            return runs[-1]

        # Chosen points: the process exits by itself (137) at the hook.
        for name, crash in (("publish-3", "publish:3"), ("marker-2", "marker:2"),
                            ("publish-30", "publish:30"), ("marker-5", "marker:5")):
            run = start(name, crash)
            code = run.process.wait(timeout=60)
            assert code == 137, f"{name} exited {code}, not at its crash point:\n{run.tail()}"
            assert run.events("assigned"), run.tail()

        # A clean stop in mid-stream: open files are published, final markers written. Before
        # the random kills, which may carry the export close to its end.
        run = start("sigterm-mid")
        run.wait_event("assigned", timeout_s=60)
        time.sleep(0.3)
        before = committed_upto(str(root), topic, sorted(ends))
        # the stop is asked for while work remains (the flush it triggers may then finish it)
        assert sum(v or 0 for v in before.values()) < sum(ends.values()), "caught up before the stop"
        assert run.terminate() == 0, run.tail()
        assert "settled=True" in run.wait_event("stopped", timeout_s=5)["reason"], run.tail()
        assert foreign_visible_files(root) == []
        after = committed_upto(str(root), topic, sorted(ends))
        assert all((after[p] or 0) >= (before[p] or 0) for p in ends), (before, after)
        print(f"SIGTERM in mid-stream: markers {before} -> {after} (ends {ends})")

        # Random moments: SIGKILL a seeded random delay after the assignment.
        rng = random.Random(SEED)
        mid_stream = 0
        for i in range(RANDOM_KILLS):
            run = start(f"random-{i}")
            seeks = run.wait_event("assigned", timeout_s=60)["seeks"]
            # around the first flushes (file age 1 s): publishes, intents and markers in flight
            delay = rng.uniform(0.2, 1.8)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.process.wait(timeout=delay)
            assert run.kill() == -9, f"random-{i} exited by itself:\n{run.tail()}"
            upto = committed_upto(str(root), topic, sorted(ends))
            mid_stream += sum(v or 0 for v in upto.values()) < sum(ends.values())
            print(f"random kill {i}: {delay:.2f} s after assignment; resumed at {seeks}, "
                  f"markers then at {upto}")
        # The kills must have hit the export while it worked, not an idle process.
        assert mid_stream >= 3, f"only {mid_stream} random kills landed before the end"

        final = start("final")
        resumed = final.wait_event("assigned", timeout_s=60)["seeks"]
        waited = wait_caught_up(str(root), topic, ends, timeout_s=240,
                                alive=final.check_alive)
        print(f"final run resumed at {resumed}, caught up in {waited:.1f} s")
        assert final.terminate() == 0, final.tail()
        stopped = final.wait_event("stopped", timeout_s=5)
        assert stopped["code"] == 0 and "settled=True" in stopped["reason"], stopped

        assert foreign_visible_files(root) == []
        leftover = root / "_tmp" / final.instance
        assert not leftover.exists() or not any(leftover.iterdir()), list(leftover.iterdir())
        verified = assert_exact(env, ends)
        held = sum(p["rows"] for p in verified["partitions"].values())
        quarantined = sum(p["quarantined"] for p in verified["partitions"].values())
        # verify checked each bad record's place; here only that they were many: a bad
        # header or body of a type that is not exported (markers 0, 3) is dropped unparsed
        assert quarantined >= 0.9 * sum(report["bad"].values())
        print(f"verify: {held} rows ({quarantined} quarantined) exactly once")
