"""Foreseeable start-up and fatal errors, as an operator meets them in real processes: one
line naming the setting, its value and what to do, a documented exit code, no traceback
(unless asked for with DEBUG). Also: only ``run`` creates the output root, a closed
standard output ends a command quietly, and options that make no sense are refused.

``python -m garmexport`` runs as a child process of the test's interpreter (the venv's
``garmexport``); "broker down" is a loopback port with no listener.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from garmexport.cli.main import PIPE_CLOSED
from garmexport.protocol.naming import FileName
from garmexport.storage.footer import FileFacts
from garmexport.testbed.embedded_broker import free_port
from tests.integration.harness import PYTHON, ROOT, Exporter, exporter_env
from tests.integration.test_cli_operator import garmexport, lines
from tests.integration.test_offsets_cli import records_of

DAY_MS = 86_400_000


def _down(root: Path, **overrides: object) -> dict[str, str]:
    """Environment with no broker listening and text logs (unless ``overrides`` say)."""
    return exporter_env(f"127.0.0.1:{free_port()}", "t", str(root),
                        **{"LOG_FORMAT": "text", **overrides})


@pytest.mark.parametrize("args", [["verify", "--no-broker"], ["verify"],
                                  ["offsets", "--no-broker"], ["offsets"],
                                  ["offsets", "set", "--no-broker", "--partition", "0",
                                   "--offset", "5"],
                                  ["compact", "--dry-run", "--no-hive"]])
def test_a_command_that_reads_the_output_refuses_a_missing_root_and_creates_nothing(
        tmp_path: Path, args: list[str]) -> None:
    root = tmp_path / "typo-root"
    code, err, seconds = garmexport(_down(root), *args)
    assert code == 2, err
    assert "Traceback" not in err and len(lines(err)) == 1, err
    for said in ("output.root", "GARMEXPORT_OUTPUT_ROOT", str(root), "does not exist",
                 "only 'garmexport run' creates it itself"):
        assert said in err, err
    assert not root.exists()
    assert seconds < 30, seconds  # compact: before Spark starts


def test_an_output_root_that_is_a_file_is_one_line_for_run_and_verify(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.write_text("not a directory")
    for args in (["run"], ["verify", "--no-broker"]):
        code, err, _ = garmexport(_down(root), *args, timeout_s=60)
        assert code == 2, err
        assert "Traceback" not in err and "FileExistsError" not in err, err
        [line] = [line for line in lines(err) if "output.root" in line]
        assert f"= {str(root)!r} is a file, not a directory" in line, err
        assert root.read_text() == "not a directory"
    # in the JSON log format, the same error is a JSON log event like every other line
    code, err, _ = garmexport(_down(root, LOG_FORMAT="json"), "run", timeout_s=60)
    assert code == 2, err
    [event] = [json.loads(line) for line in lines(err)]
    assert (event["level"], event["event"], event["command"]) == (
        "ERROR", "configuration_error", "run"), event
    assert "is a file, not a directory" in event["error"], event


def test_verify_of_a_root_written_for_another_topic_is_an_error_naming_both(
        tmp_path: Path) -> None:
    """Files of topic t5 only, source.topic = t: no row of t is read, which is not a clean
    check but a configuration error (exit 2) in one line, before the broker is read. With
    t5 it passes without claiming what only the broker can tell."""
    root = tmp_path / "out"
    day = root / "fs" / "day=2026-11-01"
    day.mkdir(parents=True)
    for p in (0, 1):
        facts = FileFacts("c", "t5", p, 0, 9, 10)
        rows = pa.table({"kafka_partition": [p] * 10, "kafka_offset": list(range(10))})
        pq.write_table(rows.replace_schema_metadata(facts.metadata()),
                       day / FileName("c", "t5", p, 0).format())
    code, err, _ = garmexport(_down(root), "verify", "--no-broker")
    assert code == 2, err
    assert "Traceback" not in err and len(lines(err)) == 1, err
    assert (f"garmexport verify: configuration error: source.topic (GARMEXPORT_SOURCE_TOPIC) "
            f"= 't': no file under {root} holds a row of it; its files hold topic 't5' "
            "(2 files)") in err, err
    # with the root's topic it passes, and says what it could not check without the broker
    done = subprocess.run([PYTHON, "-m", "garmexport", "verify", "--no-broker"], cwd=ROOT,
                          env=_down(root, SOURCE_TOPIC="t5"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith(
        "verify: OK without the broker: no duplicates, "), done.stdout
    assert "not checked: missing records" in done.stdout, done.stdout


def test_run_creates_a_missing_root_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "new" / "out"
    run = Exporter(_down(root, LOG_FORMAT="json"), tmp_path, "creates")
    try:
        created = run.wait_event("output_root_created", timeout_s=60)
        assert created["root"] == str(root) and created["done"] == "created the directory"
        assert root.is_dir()
        run.wait_event("starting", timeout_s=60)  # and it goes on
    finally:
        run.close()
    # a second start finds it and says nothing about it
    again = Exporter(_down(root, LOG_FORMAT="json"), tmp_path, "finds")
    try:
        again.wait_event("starting", timeout_s=60)
        assert again.events("output_root_created") == [], again.tail()
    finally:
        again.close()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_metrics_port_in_use_is_one_error_line_naming_port_and_setting(
        tmp_path: Path, parallelism: int) -> None:
    """The same lines from the exporter (parallelism 1) and the supervisor of readers (2,
    the default on a multi-core host), found before any wait on the broker: there is none
    here, and no line says it was tried (issue 32, item 1: the supervisor waited 5 s for
    it, then logged a traceback)."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        for level in ("INFO", "DEBUG"):
            env = _down(tmp_path / "out", LOG_FORMAT="json", METRICS_PORT=port, LOG_LEVEL=level,
                        ACTORS_PARALLELISM=parallelism, JVM_TAKEOVER="true")
            run = Exporter(env, tmp_path, f"port-{level}")
            try:
                code = run.process.wait(timeout=60)
            finally:
                run.close()
            assert code == 2, run.tail()
            [failure] = run.events("failure")
            assert failure["level"] == "ERROR"
            for said in (f"metrics.port (GARMEXPORT_METRICS_PORT) = {port}", "127.0.0.1",
                         "Address already in use", "choose a free port"):
                assert said in failure["error"], failure
            # the traceback is for developers: only at DEBUG, in a field of the same line
            assert ("detail" in failure) == (level == "DEBUG"), failure
            [stopped] = run.events("stopped")
            assert stopped["code"] == 2 and failure["error"] in stopped["reason"], stopped
            raw = [line for line in run.log_path.read_text().splitlines()
                   if not line.startswith("{")]
            assert raw == [], raw
            said = [e["event"] for e in map(json.loads, run.log_path.read_text().splitlines())]
            assert said[-2:] == ["failure", "stopped"], said
            assert not {"jvm_takeover_deferred", "kafka_log", "uncaught_exception",
                        "instance_starting"} & set(said), said
    finally:
        holder.close()


def _closed_stdout(env: dict[str, str], *args: str) -> tuple[int, str]:
    """Run ``garmexport ARGS`` with a standard output whose reader has gone (``| head``
    that exited): (exit code, stderr)."""
    proc = subprocess.Popen([PYTHON, "-m", "garmexport", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()  # before the child has printed anything: every write fails
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_a_closed_pipe_ends_a_command_quietly(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=2)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"), LOG_FORMAT="text")
    for args in (["config"],
                 ["produce", "--count", "3000", "--partitions", "2", "--topic", topic],
                 ["produce", "--count", "10", "--partitions", "2", "--topic", topic, "--json"]):
        code, err = _closed_stdout(env, *args)
        assert code == PIPE_CLOSED, (args, err)
        assert "BrokenPipeError" not in err and "uncaught_exception" not in err, err
        assert "Exception ignored" not in err and "Traceback" not in err, err
    # the records were produced all the same: the output was only a report
    assert sum(len(r) for r in records_of(broker.bootstrap, topic).values()) == 3010


@pytest.mark.parametrize("args, said", [
    (["verify", "--progress-s", "-1"], "argument --progress-s: must be 0 or more, got -1.0"),
    (["verify", "--timeout-s", "-1"], "argument --timeout-s: must be more than 0, got -1.0"),
    (["verify", "--timeout-s", "0"], "argument --timeout-s: must be more than 0, got 0.0"),
    (["offsets", "--timeout-s", "-1"], "argument --timeout-s: must be more than 0"),
    (["offsets", "set", "--partition", "0", "--timestamp", "-5"],
     "argument --timestamp: a time must be epoch ms of 0 or more or ISO 8601, got -5"),
    (["produce", "--days", "0"], "argument --days: must be more than 0, got 0.0"),
    (["produce", "--days", "nan"], "argument --days: not a finite number: 'nan'"),
    (["run", "--instance", "a b/c"],
     "argument --instance: instance id 'a b/c' may only hold letters, digits"),
])
def test_a_negative_duration_or_time_or_a_bad_instance_id_is_a_usage_error(
        tmp_path: Path, args: list[str], said: str) -> None:
    (tmp_path / "out").mkdir()
    code, err, _ = garmexport(_down(tmp_path / "out"), *args)
    assert code == 2, err
    assert "Traceback" not in err and said in lines(err)[-1], err


def test_produce_takes_a_fraction_of_a_day(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=1)
    now_ms = 1_795_300_000_000
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"))
    done = subprocess.run([PYTHON, "-m", "garmexport", "produce", "--count", "500", "--topic",
                           topic, "--partitions", "1", "--days", "0.5", "--now", str(now_ms),
                           "--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"] == 500
    stamps = [r.timestamp()[1] for r in records_of(broker.bootstrap, topic)[0]]
    assert len(stamps) == 500
    assert now_ms - DAY_MS // 2 < min(stamps) < now_ms - DAY_MS // 2 + DAY_MS // 100
    assert max(stamps) == now_ms


def test_no_broker_help_names_both_actions_that_take_it(tmp_path: Path) -> None:
    done = subprocess.run([PYTHON, "-m", "garmexport", "offsets", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=_down(tmp_path))
    assert done.returncode == 0
    options = done.stdout[done.stdout.index("options:"):]  # past the usage line
    text = " ".join(options.split())
    helped = text[text.index("--no-broker"):text.index("--timeout-s")]
    assert "show" in helped and "set" in helped, helped
