"""The broker freezes, then dies, and comes back: the exporter says so, once, in JSON.

A real ``garmexport run`` (``log.format = "json"``, as the shipped Marathon app) exports
from a tansu broker of its own. The broker is first frozen (SIGSTOP: its connections stay
open, the group session runs out), then resumed (SIGCONT); then killed and restarted on the
same port (memory storage: the topic is created again). Expected for each outage: one
``broker_unreachable`` (WARNING, with the reason), readiness 503 naming the broker, then one
``broker_reachable`` and readiness 200 again. Throughout: librdkafka's retries never reach
the output raw (``%3|...|FAIL|...``), they come as rate-limited ``kafka_log`` events, and
every line the process writes to stdout and stderr is a JSON object.

The same with one process and with an instance of two readers (the default path): each
reader has its own consumer, so each says every outage once, in its own ``reader``-named
lines, and the supervisor's readiness folds theirs, naming every reader the outage reaches.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.broker import create_topic, start_broker
from tests.integration.harness import Exporter, exporter_env, produce

PARTITIONS = 2
DEAD_S = 8.0  # librdkafka retries a refused connection many times a second


def _ready(run: Exporter) -> tuple[int, list[str]]:
    code, body = run.http_get("/health/ready")
    return code, json.loads(body)["reasons"]


def _wait_ready(run: Exporter, code: int, timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        got, reasons = _ready(run)
        if got == code:
            return reasons
        run.check_alive()
        assert time.monotonic() < deadline, f"ready stayed {got} {reasons}:\n{run.tail()}"
        time.sleep(0.2)


def _unreachable(reasons: list[str], parallelism: int) -> bool:
    """Whether readiness names the broker as unreachable: with readers, for every one
    (each folded reason names its reader)."""
    if parallelism == 1:
        return any(r.startswith("broker unreachable") for r in reasons)
    return all(any(r.startswith(f"r{k}: broker unreachable") for r in reasons)
               for k in range(parallelism))


def _wait_unready(run: Exporter, parallelism: int, timeout_s: float) -> list[str]:
    """Readiness 503; with readers, until it names the broker for every one (a reader's
    readiness follows its event within a tick of its main loop)."""
    deadline = time.monotonic() + timeout_s
    while True:
        reasons = _wait_ready(run, 503, timeout_s)
        if parallelism == 1 or _unreachable(reasons, parallelism):
            return reasons
        assert time.monotonic() < deadline, f"ready said {reasons}:\n{run.tail()}"
        time.sleep(0.2)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_broker_outage_is_one_event_each_way_and_unready_while_it_lasts(
        tmp_path: Path, parallelism: int) -> None:
    broker = start_broker(tmp_path / "broker")
    topic = broker.new_topic(partitions=PARTITIONS)
    produce(broker.bootstrap, topic, 2_000, partitions=PARTITIONS, seed=4, days=1)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"),
                       ACTORS_PARALLELISM=parallelism)
    run = Exporter(env, tmp_path, f"outage-{parallelism}")
    each = parallelism  # each reader says each outage once
    try:
        run.wait_event("assigned", timeout_s=60, count=parallelism)
        _wait_ready(run, 200, timeout_s=30)

        # 1. frozen: connections stay open, heartbeats go unanswered
        broker.process.send_signal(signal.SIGSTOP)
        try:
            down = run.wait_event("broker_unreachable", timeout_s=30, count=each)
            assert down["level"] == "WARNING" and down["reason"], down
            reasons = _wait_unready(run, parallelism, timeout_s=10)
            assert _unreachable(reasons, parallelism), reasons
        finally:
            broker.process.send_signal(signal.SIGCONT)
        run.wait_event("broker_reachable", timeout_s=60, count=each)
        _wait_ready(run, 200, timeout_s=30)

        # 2. dead: every connection refused until it comes back on the same port
        broker.stop()
        run.wait_event("broker_unreachable", timeout_s=30, count=2 * each)
        reasons = _wait_unready(run, parallelism, timeout_s=10)
        assert _unreachable(reasons, parallelism), reasons
        time.sleep(DEAD_S)
        broker = start_broker(tmp_path / "broker2", port=broker.port)
        create_topic(broker.bootstrap, topic, PARTITIONS)
        run.wait_event("broker_reachable", timeout_s=60, count=2 * each)
        _wait_ready(run, 200, timeout_s=30)
        assert run.terminate() == 0, run.tail()

        lines = run.log_path.read_bytes().splitlines()
        raw = [line for line in lines if b"%3|" in line or line.startswith(b"%")]
        assert not raw, raw[:5]
        docs = []
        for line in lines:
            doc = json.loads(line)  # every line of stdout and stderr is JSON
            assert isinstance(doc, dict), line
            docs.append(doc)
        # one process, or every reader and the supervisor: each says each outage once
        names = [f"r{k}" for k in range(parallelism)] if parallelism > 1 else [None]
        for name in names:
            own = [d for d in docs if d.get("reader") == name] if name else docs
            events = [d["event"] for d in own]
            assert events.count("broker_unreachable") == 2, (name, events)
            assert events.count("broker_reachable") == 2, (name, events)
            refused = [d for d in own if d["event"] == "kafka_log" and "refused" in d["message"]]
            # librdkafka retried for seconds; one line per kind of message and window remains
            assert 1 <= len(refused) <= 3, (name, refused)
        if parallelism > 1:  # one stream: every line names its reader, or the supervisor
            assert {d.get("reader") for d in docs} == {"supervisor", *names}, docs[-5:]
        events = [d["event"] for d in docs]
        print(f"{len(lines)} lines; kafka_log {events.count('kafka_log')}")
    except BaseException:
        print(run.tail(80))
        raise
    finally:
        run.close()
        broker.stop()
