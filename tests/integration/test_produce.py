"""`garmexport produce` against the real broker: what it reports is what the topic holds."""

from __future__ import annotations

import collections
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from garmexport.wire import frames
from garmexport.cli.produce import client_settings, produce
from garmexport.kafka.topics import ensure_topic
from garmexport.settings.load import load_config
from garmexport.wire.events import REGISTRY
from garmexport.testbed.generator import Spec, generate, parse_mix
from tests.broker import consume_all

NOW = "2026-11-03T13:00:00+00:00"
NOW_MS = int(datetime.datetime.fromisoformat(NOW).timestamp() * 1000)
ROOT = Path(__file__).resolve().parents[2]
# The caller's GARMEXPORT_* variables would change the configuration under test.
ENV = {k: v for k, v in os.environ.items() if not k.startswith("GARMEXPORT_")}


def garmexport(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "garmexport", *args], capture_output=True,
                          text=True, timeout=120, env=ENV, cwd=ROOT)


def kind_of(value: bytes | None) -> str:
    decoded = frames.decode(value)
    if isinstance(decoded, frames.DecodeFailure):
        return decoded.reason.value
    return REGISTRY[decoded.marker].name


def test_the_topic_holds_exactly_the_reported_records_per_type_and_bad_kind(broker):
    topic = f"produce-{broker.new_topic()}"  # a name that does not exist yet: produce creates it
    done = garmexport("produce", "--bootstrap", broker.bootstrap, "--topic", topic,
                      "--count", "20000", "--partitions", "3", "--seed", "11", "--now", NOW,
                      "--bad-share", "0.01", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["total"] == 20_000 and report["failed"] == 0

    records = consume_all(broker.bootstrap, topic)
    counts = collections.Counter(kind_of(r.value) for r in records)
    assert {k: n for k, n in counts.items() if k in report["types"]} == report["types"]
    assert {k: n for k, n in counts.items() if k in report["bad"]} == report["bad"]
    assert sum(counts.values()) == 20_000
    assert len(report["bad"]) == 7 and len(report["types"]) >= 18
    partitions = collections.Counter(str(r.partition) for r in records)
    assert dict(partitions) == report["partitions"]


def test_produced_bytes_sit_at_the_generators_partition_and_offset(broker):
    topic = broker.new_topic(partitions=2)
    spec = Spec(now_ms=NOW_MS, seed=4, partitions=2, bad_share=0.05, mix=parse_mix("uniform"))
    settings = client_settings(load_config(None, {}), broker.bootstrap)
    report = produce(settings, topic, spec, 3000)
    assert report["failed"] == 0 and report["total"] == 3000

    expected = collections.defaultdict(list)
    for record in generate(spec, 3000):
        expected[record.partition].append((record.value, record.timestamp_ms))
    got = collections.defaultdict(list)
    for record in consume_all(broker.bootstrap, topic):
        got[record.partition].append((record.value, record.timestamp_ms))
        assert record.key is None
    assert got == expected


def test_the_text_report_names_every_type_it_wrote(broker):
    topic = broker.new_topic(partitions=1)
    done = garmexport("produce", "--bootstrap", broker.bootstrap, "--topic", topic,
                      "--count", "500", "--partitions", "1", "--mix", "fs=1,gc=1", "--now", NOW)
    assert done.returncode == 0, done.stderr
    assert "produced 500 records" in done.stdout
    assert "FS_EVENT" in done.stdout and "GC_EVENT" in done.stdout
    assert "SPARK_TASK_EVENT" not in done.stdout


def test_a_topic_with_too_few_partitions_is_an_error_not_a_silent_remap(broker):
    topic = broker.new_topic(partitions=2)
    done = garmexport("produce", "--bootstrap", broker.bootstrap, "--topic", topic,
                      "--count", "10", "--partitions", "4")
    assert done.returncode == 1
    assert "has 2 partitions, 4 were asked for" in done.stderr
    assert consume_all(broker.bootstrap, topic, timeout_s=20) == []


def test_a_new_topic_gets_the_partitions_asked_for_not_the_brokers_default(broker):
    # tansu creates a topic named in a metadata request with 4 partitions; the demo with
    # --partitions 2 then waited forever for 2 partitions of a 4-partition topic
    topic = f"fresh-{os.getpid()}-{broker.new_topic(partitions=1)}"
    done = garmexport("produce", "--bootstrap", broker.bootstrap, "--topic", topic,
                      "--count", "10", "--partitions", "2")
    assert done.returncode == 0, done.stderr
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415
    listed = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert len(listed.topics[topic].partitions) == 2
    assert ensure_topic({"bootstrap.servers": broker.bootstrap}, topic, 1) == 2


@pytest.mark.parametrize("args,message", [
    (["--bad-share", "2"], "bad_share"),
    (["--mix", "nope=1"], "nope"),
    (["--count", "-1"], "--count"),
])
def test_bad_produce_arguments_exit_2_with_a_message(args, message):
    done = garmexport("produce", "--bootstrap", "127.0.0.1:1", *args)
    assert done.returncode == 2
    assert message in done.stderr


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_ctrl_c_prints_what_reached_the_topic_then_exits_130(broker, as_json: bool) -> None:
    """Issue 40: Ctrl-C exited 130 and said nothing of what had reached the topic."""
    topic = broker.new_topic(partitions=3)
    run = subprocess.Popen(
        [sys.executable, "-m", "garmexport", "produce", "--bootstrap", broker.bootstrap,
         "--topic", topic, "--rate", "3000", "--duration", "120", "--partitions", "3",
         "--now", NOW, "--progress-s", "0.2", *(["--json"] if as_json else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        assert run.stderr is not None
        said = []
        for line in run.stderr:  # it produces: a progress line past the first thousands
            said.append(line)
            done = re.search(r"produced (\d+)/360000", line)
            if done and int(done[1]) >= 4096:
                break
        else:
            raise AssertionError(f"no progress line; exit {run.wait()}: {said}")
        interrupted_at = time.monotonic()
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 130, err
    assert time.monotonic() - interrupted_at < 15, "the stop waited for the whole run"
    records = consume_all(broker.bootstrap, topic)
    partitions = collections.Counter(str(r.partition) for r in records)
    assert 0 < len(records) < 360_000, (out, err)
    if as_json:
        report = json.loads(out)
        assert report["interrupted"] is True and report["in_flight"] == 0, report
        assert report["delivered"] == len(records), report
        assert report["delivered_partitions"] == dict(sorted(partitions.items())), report
        assert 0 < report["seconds"] < 120, report
    else:
        lines = out.splitlines()
        assert lines[0].startswith(f"interrupted (Ctrl-C) after "), out
        assert f" s: {len(records)} records delivered to {topic} of " in lines[0], out
        assert lines[1:] == [f"  {'delivered':<10} {'partition ' + p:<38} {n:>10}"
                             for p, n in sorted(partitions.items())], out
