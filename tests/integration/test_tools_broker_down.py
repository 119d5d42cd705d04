"""The tools' own Kafka clients with the broker down: librdkafka's lines go through logging.

``produce``, ``offsets`` (show and set) and ``verify`` run as real processes against a
loopback port where nothing listens, then against a broker that answers metadata but
advertises such a port (so the metadata probe passes and the clients that read the topic
fail). librdkafka retries a refused connection many times a second; none of that may reach
stderr raw (``%3|...|FAIL|...``). Each run ends with its one error line and exit 1 (runtime
failure, README "Exit codes"); a failed command prints no report on stdout. With
``log.format = "json"`` every stderr line is a JSON object (stdout would be the command's
data, not a log: here it stays empty), except verify's progress lines (docs/operations.md:
"it prints progress to stderr"). The demo is not run: it starts its own broker, and its
clients are the same ``produce``/``verify``/embedded broker code.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from confluent_kafka import Producer

from garmexport.testbed.embedded_broker import free_port, start_broker
from garmexport.kafka.client_callbacks import client_log_settings
from tests.integration.harness import PYTHON, ROOT, exporter_env

RAW = re.compile(r"^%\d\|")  # librdkafka's own stderr line: %<syslog level>|<time>|<fac>|...
COMMANDS = (
    ("produce", "--count", "10", "--partitions", "1", "--progress-s", "0"),
    ("offsets",),
    ("offsets", "set", "--partition", "0", "--timestamp", "0"),
    ("verify",),
)


def _run_all(env: dict[str, str], commands=COMMANDS) -> list[tuple[tuple[str, ...], int, str, str]]:
    """(args, exit code, stdout, stderr) of every command, run side by side (each waits
    seconds for a broker that never answers)."""
    running = [(args, subprocess.Popen([PYTHON, "-m", "garmexport", *args], env=env, cwd=ROOT,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)) for args in commands]
    done = []
    for args, process in running:
        out, err = process.communicate(timeout=120)
        done.append((args, process.returncode, out, err))
    return done


def _check(runs, fmt: str) -> None:
    for args, code, stdout, stderr in runs:
        what = f"{' '.join(args)} ({fmt}):\n{stderr}"
        err = [line for line in stderr.splitlines()
               if line.strip() and not (fmt == "text" and line.startswith("verify: "))]
        assert code == 1, what
        assert stdout == "", what
        assert err and not [line for line in err if RAW.match(line)], what
        assert "Traceback" not in stderr, what
        if fmt == "text":
            assert " ERROR garmexport " in err[-1] and "BrokerError" in err[-1], what
            continue
        docs = [json.loads(line) for line in err]  # raises on any line that is not JSON
        assert all(isinstance(d, dict) for d in docs), what
        last = docs[-1]
        assert last["level"] == "ERROR" and last["event"].startswith("BrokerError"), what
        # anything before the error is the client's own, relayed, or the command's progress
        for d in docs[:-1]:
            assert (d["logger"], d["event"]) in (("garmexport.kafka.signals", "kafka_log"),
                                                 (f"garmexport.{args[0]}", "progress")), what
        if args[0] == "produce":  # the relayed line says why the broker was not reached
            assert any("Connection refused" in d.get("message", "") for d in docs[:-1]), what


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_raw_librdkafka_line_and_one_error_line_with_the_broker_down(
        tmp_path: Path, fmt: str) -> None:
    (tmp_path / "out").mkdir()  # the output is there: the broker is what is missing
    env = exporter_env(f"127.0.0.1:{free_port()}", "t", str(tmp_path / "out"), LOG_FORMAT=fmt)
    _check(_run_all(env), fmt)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_raw_librdkafka_line_when_the_broker_advertises_a_dead_address(
        tmp_path: Path, fmt: str) -> None:
    broker = start_broker(tmp_path / "broker", advertised_port=free_port())
    try:
        # tansu creates a topic named in a producer's metadata request
        producer = Producer({"bootstrap.servers": broker.bootstrap, **client_log_settings(True)})
        assert producer.list_topics("garmadon", timeout=10).topics["garmadon"].partitions
        (tmp_path / "out").mkdir()  # the output is there: the broker is what fails
        env = exporter_env(broker.bootstrap, "garmadon", str(tmp_path / "out"), LOG_FORMAT=fmt)
        runs = _run_all(env, (("offsets", "--timeout-s", "3"), ("verify", "--timeout-s", "3")))
    finally:
        broker.stop()
    _check(runs, fmt)
