"""The broker freezes, then dies, and comes back: the exporter says so, once, in JSON.

A real ``garmexport run`` (``log.format = "json"``, as the shipped Marathon app) exports
from a tansu broker of its own. The broker is first frozen (SIGSTOP: its connections stay
open, the group session runs out), then resumed (SIGCONT); then killed and restarted on the
same port (memory storage: the topic is created again). Expected for each outage: one
``broker_unreachable`` (WARNING, with the reason), readiness 503 naming the broker, then one
``broker_reachable`` and readiness 200 again. Throughout: librdkafka's retries never reach
the output raw (``%3|...|FAIL|...``), they come as rate-limited ``kafka_log`` events, and
every line the process writes to stdout and stderr is a JSON object.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

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


def test_a_broker_outage_is_one_event_each_way_and_unready_while_it_lasts(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "broker")
    topic = broker.new_topic(partitions=PARTITIONS)
    produce(broker.bootstrap, topic, 2_000, partitions=PARTITIONS, seed=4, days=1)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"))
    run = Exporter(env, tmp_path, "outage")
    try:
        run.wait_event("assigned", timeout_s=60)
        _wait_ready(run, 200, timeout_s=30)

        # 1. frozen: connections stay open, heartbeats go unanswered
        broker.process.send_signal(signal.SIGSTOP)
        try:
            down = run.wait_event("broker_unreachable", timeout_s=30)
            assert down["level"] == "WARNING" and down["reason"], down
            reasons = _wait_ready(run, 503, timeout_s=10)
            assert any(r.startswith("broker unreachable") for r in reasons), reasons
        finally:
            broker.process.send_signal(signal.SIGCONT)
        run.wait_event("broker_reachable", timeout_s=60)
        _wait_ready(run, 200, timeout_s=30)

        # 2. dead: every connection refused until it comes back on the same port
        broker.stop()
        run.wait_event("broker_unreachable", timeout_s=30, count=2)
        reasons = _wait_ready(run, 503, timeout_s=10)
        assert any(r.startswith("broker unreachable") for r in reasons), reasons
        time.sleep(DEAD_S)
        broker = start_broker(tmp_path / "broker2", port=broker.port)
        create_topic(broker.bootstrap, topic, PARTITIONS)
        run.wait_event("broker_reachable", timeout_s=60, count=2)
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
        events = [d["event"] for d in docs]
        assert events.count("broker_unreachable") == 2, events
        assert events.count("broker_reachable") == 2, events
        refused = [d for d in docs if d["event"] == "kafka_log" and "refused" in d["message"]]
        # librdkafka retried for seconds; one line per kind of message and window remains
        assert 1 <= len(refused) <= 3, refused
        print(f"{len(lines)} lines; kafka_log {events.count('kafka_log')}")
    except BaseException:
        print(run.tail(80))
        raise
    finally:
        run.close()
        broker.stop()
