"""Exactly once with the writers' work on other threads: killed where that work waits.

With ``actors.cores`` above 1 a batch can sit in three places the single-threaded exporter
never had (DESIGN.md 9.6): queued in its writer actor behind a running job (between the
reader and the worker), taken by an executor thread and not yet handled (in a worker), and a
file encoded to Parquet bytes on an executor thread with nothing of it written (mid-encode).
The exporter, given 3 threads, is made to exit at each of them (``os._exit(137)``, as a
SIGKILL would, from the thread that got there while the others go on working), and
SIGKILLed at random moments too; then one run catches up and ``garmexport verify`` must
find every record exactly once.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
from pathlib import Path


from garmexport.pipeline.crash_points import ENCODED, PLACES, QUEUED, WORKER
from tests.integration.harness import (
    Exporter, assert_exact, committed_upto, exporter_env, exporter_runs, foreign_visible_files,
    produce, topic_ends, wait_caught_up,
)

RECORDS = 120_000
SEED = 20261124
#: (place, n): the n-th time the process gets there; later n land deeper in the export
CHOSEN = ((QUEUED, 3), (WORKER, 5), (ENCODED, 2), (QUEUED, 40), (WORKER, 60), (ENCODED, 12))


def test_chosen_places_cover_every_place() -> None:
    assert {place for place, _ in CHOSEN} == set(PLACES)


def test_every_record_once_when_killed_with_work_in_lanes_workers_and_encodes(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=4)
    produce(broker.bootstrap, topic, RECORDS, partitions=4, seed=11, days=3,
            late_share=0.1, bad_share=0.005)
    ends = topic_ends(broker.bootstrap, topic)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), ACTORS_CORES=3,
                       WRITER_MAX_FILE_AGE_S=1, PROTOCOL_HEARTBEAT_INTERVAL_S=1,
                       # small batches and files: many messages queued, many encodes
                       SOURCE_POLL_MAX_RECORDS=2000, WRITER_DECODE_BATCH_RECORDS=300,
                       WRITER_MAX_FILE_ROWS=900, KAFKA_SESSION_TIMEOUT_MS=2000)
    with exporter_runs() as runs:
        def start(name: str, crash: str | None = None) -> Exporter:
            runs.append(Exporter(env, tmp_path, name,
                                 {"TEST_GARMEXPORT_CRASH_AFTER": crash} if crash else None))
            return runs[-1]

        for place, n in CHOSEN:
            run = start(f"{place}-{n}", f"{place}:{n}")
            code = run.process.wait(timeout=90)
            assert code == 137, f"{place}:{n} exited {code}, not at its place:\n{run.tail()}"
            threads = run.events("writer_threads")
            assert threads and threads[0]["threads"] == 3, run.tail()
        rng = random.Random(SEED)
        for i in range(3):
            run = start(f"random-{i}")
            run.wait_event("assigned", timeout_s=60)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.process.wait(timeout=rng.uniform(0.3, 1.5))
            assert run.kill() == -9, f"random-{i} exited by itself:\n{run.tail()}"
        upto = committed_upto(str(root), topic, sorted(ends))
        assert sum(v or 0 for v in upto.values()) < sum(ends.values()), \
            f"caught up before the last kill: {upto}"

        final = start("final")
        final.wait_event("assigned", timeout_s=60)
        wait_caught_up(str(root), topic, ends, timeout_s=240, alive=final.check_alive)
        assert final.terminate() == 0, final.tail()
        assert "settled=True" in final.wait_event("stopped", timeout_s=5)["reason"]
        assert foreign_visible_files(root) == []
        assert_exact(env, ends)
