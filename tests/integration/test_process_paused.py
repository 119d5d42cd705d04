"""An exporter that was itself paused (SIGSTOP) says so when it resumes, not "broker down".

A real ``garmexport run`` catches up on the real broker, then is stopped with SIGSTOP for
longer than its session timeout (3 s here) and continued. The group dropped it meanwhile,
and librdkafka reports its partitions lost on resume (when the broker still answered the
first heartbeat after the resume, nothing was lost and the stop is tried again). The broker was fine all along, so
the log must not claim ``broker_unreachable``; it must say what is known: one
``session_lost`` (WARNING) whose reason says the process was not scheduled for about the
time it was stopped, then ``session_restored`` once the group assigns it partitions again.
Records produced meanwhile are exported exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.integration.harness import (
    Exporter, assert_exact, exporter_env, exporter_runs, produce, topic_ends, wait_caught_up,
)

STOPPED_S = 8.0
TRIES = 4


def test_a_process_stopped_past_its_session_timeout_says_it_was_not_scheduled(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=2)
    root = str(tmp_path / "out")
    produce(broker.bootstrap, topic, 1000, partitions=2, seed=8, days=1)
    env = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=1)
    with exporter_runs() as runs:
        run = Exporter(env, tmp_path, "paused")
        runs.append(run)
        wait_caught_up(root, topic, topic_ends(broker.bootstrap, topic), 120, run.check_alive)
        lost = None
        for _ in range(TRIES):
            os.kill(run.pid, signal.SIGSTOP)
            try:
                time.sleep(STOPPED_S)
            finally:
                os.kill(run.pid, signal.SIGCONT)
            try:
                lost = run.wait_event("session_lost", timeout_s=20)
                break
            except AssertionError:
                # the first heartbeat after the resume may still be answered (the broker
                # kept the member): then no session was lost and there is nothing to say
                assert run.events("lost") == [], run.tail()
        assert lost is not None, f"no session lost in {TRIES} stops of {STOPPED_S} s"
        assert lost["level"] == "WARNING", lost
        assert "not scheduled for" in lost["reason"], lost
        assert STOPPED_S - 1.5 <= lost["not_scheduled_s"] <= STOPPED_S + 3, lost
        run.wait_event("session_restored", timeout_s=60)
        produce(broker.bootstrap, topic, 500, partitions=2, seed=9, days=1)
        ends = topic_ends(broker.bootstrap, topic)
        wait_caught_up(root, topic, ends, 120, run.check_alive)
        assert run.events("broker_unreachable") == [], run.events("broker_unreachable")
        assert run.terminate() == 0, run.tail()
    assert_exact(env, ends)
