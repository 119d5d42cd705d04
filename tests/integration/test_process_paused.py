"""An exporter that was itself paused (SIGSTOP) says so when it resumes, not "broker down".

A real ``garmexport run`` catches up on the real broker, then is stopped with SIGSTOP for
longer than its session timeout (3 s here) and continued. The group dropped it meanwhile,
and librdkafka reports its partitions lost on resume (when the broker still answered the
first heartbeat after the resume, nothing was lost and the stop is tried again). The broker was fine all along, so
the log must not claim ``broker_unreachable``; it must say what is known: one
``session_lost`` (WARNING) whose reason says the process was not scheduled for about the
time it was stopped, then ``session_restored`` once the group assigns it partitions again.
Readiness says the same: while it rejoins, ``/health/ready`` answers 503 with
``rejoining the group: group session lost ...``, never ``broker unreachable``, and 200 again
once it is assigned. Records produced meanwhile are exported exactly once.

The same with one process and with an instance of two readers (the default path), whose
readers share the supervisor's process group: the whole group is stopped (``kill -STOP --
-PGID``, as a frozen container or VM stops every process of the instance). Each reader then
says its own ``session_lost`` and ``session_restored``, and the supervisor's readiness folds
theirs, naming the reader that rejoins (``r1: rejoining the group: ...``).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.integration.harness import (
    Exporter, assert_exact, exporter_env, exporter_runs, produce, topic_ends, wait_caught_up,
)

STOPPED_S = 8.0
TRIES = 4


class ReadinessLog:
    """Asks ``/health/ready`` every 50 ms in a thread and keeps every (status, reasons)
    answered: the rejoin after a resume can take well under a second."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/health/ready"
        self.answers: list[tuple[int, list[str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                with urllib.request.urlopen(self.url, timeout=2) as answer:
                    code, body = answer.status, answer.read()
            except urllib.error.HTTPError as exc:
                code, body = exc.code, exc.read()
            except OSError:
                continue  # stopped (SIGSTOP): no answer in time
            self.answers.append((code, json.loads(body)["reasons"]))

    def reasons(self) -> list[str]:
        return [r for _, rs in self.answers for r in rs]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _readers(parallelism: int) -> list[str | None]:
    """The names in the ``reader`` field of the log: None for one process."""
    return [f"r{k}" for k in range(parallelism)] if parallelism > 1 else [None]


def _own(reason: str, parallelism: int) -> str:
    """A folded readiness reason without its reader's prefix (``r1: ``)."""
    return reason.split(": ", 1)[1] if parallelism > 1 else reason


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_process_stopped_past_its_session_timeout_says_it_was_not_scheduled(
        broker, tmp_path: Path, parallelism: int) -> None:
    topic = broker.new_topic(partitions=2)
    root = str(tmp_path / "out")
    produce(broker.bootstrap, topic, 1000, partitions=2, seed=8, days=1)
    env = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=1,
                       ACTORS_PARALLELISM=parallelism)
    readers = _readers(parallelism)
    # with readers, the whole instance: its process group (the supervisor's pid)
    signal_instance = os.killpg if parallelism > 1 else os.kill
    with exporter_runs() as runs:
        run = Exporter(env, tmp_path, f"paused-{parallelism}", own_group=parallelism > 1)
        runs.append(run)
        run.wait_event("assigned", timeout_s=60, count=parallelism)
        wait_caught_up(root, topic, topic_ends(broker.bootstrap, topic), 120, run.check_alive)
        readiness = ReadinessLog(run.metrics_port())
        lost: dict[str | None, dict] = {}
        for _ in range(TRIES):
            signal_instance(run.pid, signal.SIGSTOP)
            try:
                time.sleep(STOPPED_S)
            finally:
                signal_instance(run.pid, signal.SIGCONT)
            try:
                for reader in readers:  # every reader, each its own session
                    lost[reader] = run.wait_event("session_lost", timeout_s=20,
                                                  where=lambda d, r=reader: d.get("reader") == r)
                break
            except AssertionError:
                # the first heartbeat after the resume may still be answered (the broker
                # kept the member): then no session was lost and there is nothing to say
                losing = {d.get("reader") for d in run.events("lost")}
                assert losing <= set(lost), run.tail()
        assert len(lost) == parallelism, f"no session lost in {TRIES} stops of {STOPPED_S} s"
        for said in lost.values():
            assert said["level"] == "WARNING", said
            assert "not scheduled for" in said["reason"], said
            assert STOPPED_S - 1.5 <= said["not_scheduled_s"] <= STOPPED_S + 3, said
        for reader in readers:
            run.wait_event("session_restored", timeout_s=60,
                           where=lambda d, r=reader: d.get("reader") == r)
        deadline = time.monotonic() + 30
        while not readiness.answers or readiness.answers[-1][0] != 200:
            assert time.monotonic() < deadline, (readiness.answers[-5:], run.tail())
            time.sleep(0.1)
        readiness.close()
        said = readiness.reasons()
        assert not [r for r in said if _own(r, parallelism).startswith("broker unreachable")], said
        rejoining = [r for r in said
                     if _own(r, parallelism).startswith("rejoining the group: group session lost")]
        assert rejoining and "not scheduled for" in rejoining[0], readiness.answers
        if parallelism > 1:  # the supervisor's fold names the reader of every reason,
            assert all(r.startswith(("r0: ", "r1: ")) for r in said), said
            # and every reader said it was rejoining, not one for the instance
            assert {r.split(": ", 1)[0] for r in rejoining} == {"r0", "r1"}, rejoining
        produce(broker.bootstrap, topic, 500, partitions=2, seed=9, days=1)
        ends = topic_ends(broker.bootstrap, topic)
        wait_caught_up(root, topic, ends, 120, run.check_alive)
        assert run.events("broker_unreachable") == [], run.events("broker_unreachable")
        assert run.terminate() == 0, run.tail()
        if parallelism > 1:
            stopped = run.wait_event("instance_stopped", timeout_s=5)
            assert stopped["code"] == 0 and stopped["readers"] == {"r0": 0, "r1": 0}, stopped
    assert_exact(env, ends)
