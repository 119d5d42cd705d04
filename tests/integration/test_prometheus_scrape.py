"""A real Prometheus server scrapes a running exporter, and its query API serves the lag.

Prometheus (the Debian package's ``prometheus`` binary) gets a static scrape config for the
exporter's metrics port (1 s interval, storage in the test's tmp dir, a free loopback port
for its own API); ``/api/v1/query?query=garmexport_consumer_lag_offsets`` must return one
series per partition, labelled with the topic and partition, and reach 0 on all of them
once the exporter has caught up. Skipped only when the binary is missing.

The same with one process and with an instance of two readers (the default path), whose
supervisor's port is the one target: each partition's series comes from the reader that
holds it (a ``reader`` label), PromQL sums the readers' counters to what was produced, and
the supervisor's ``garmexport_reader_scrape_ok`` says every reader answered.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.broker import free_port
from tests.integration.harness import Exporter, exporter_env, produce
from tests.system_tools import unavailable

PARTITIONS = 4
RECORDS = 10_000
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def query(api: str, promql: str) -> list[dict]:
    """The result vector of an instant query; [] while Prometheus is not answering yet."""
    url = f"{api}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            doc = json.load(answer)
    except OSError:
        return []
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it is still running after ``grace_s``."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_prometheus_scrapes_the_lag_of_every_partition(
        broker, tmp_path: Path, parallelism: int) -> None:
    if not Path(PROMETHEUS).is_file():
        unavailable(f"prometheus binary not found (looked on PATH and at {PROMETHEUS}); "
                    "install the Debian package 'prometheus'")
    topic = broker.new_topic(partitions=PARTITIONS)
    produce(broker.bootstrap, topic, RECORDS, partitions=PARTITIONS, seed=3, days=1)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, ACTORS_PARALLELISM=parallelism)
    exporter = Exporter(env, tmp_path, f"scraped-{parallelism}")
    prometheus = None
    try:
        port = exporter.metrics_port()
        exporter.wait_event("assigned", timeout_s=60, count=parallelism)
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: garmexport\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        api_port = free_port()
        api = f"http://127.0.0.1:{api_port}"
        log = open(tmp_path / "prometheus.log", "wb")
        prometheus = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{api_port}"],
            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
        log.close()

        deadline, series = time.monotonic() + 120, []
        while True:
            series = query(api, "garmexport_consumer_lag_offsets")
            by_partition = {s["metric"].get("partition"): float(s["value"][1]) for s in series}
            if sorted(by_partition) == [str(p) for p in range(PARTITIONS)] \
                    and not any(by_partition.values()):
                break
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            assert exporter.alive(), exporter.tail()
            assert time.monotonic() < deadline, (series, exporter.tail(10),
                                                 (tmp_path / "prometheus.log").read_text()[-2000:])
            time.sleep(1.0)
        for s in series:
            assert s["metric"]["job"] == "garmexport" and s["metric"]["topic"] == topic, s
            assert s["metric"]["instance"] == f"127.0.0.1:{port}", s
        up = query(api, 'up{job="garmexport"}')
        assert [float(s["value"][1]) for s in up] == [1.0]
        consumed = query(api, "sum(garmexport_events_consumed_total)")
        assert float(consumed[0]["value"][1]) == RECORDS
        if parallelism > 1:
            # each partition's lag from the one reader that holds it, two partitions each
            owner = {s["metric"]["partition"]: s["metric"].get("reader") for s in series}
            assert len(series) == PARTITIONS and sorted(owner.values()) == \
                ["r0", "r0", "r1", "r1"], series
            # the readers' counters, each its share, sum to what was produced (above)
            shares = {s["metric"]["reader"]: float(s["value"][1]) for s in query(
                api, "sum by (reader) (garmexport_events_consumed_total)")}
            assert set(shares) == {"r0", "r1"} and all(shares.values()), shares
            answered = {s["metric"]["reader"]: float(s["value"][1])
                        for s in query(api, "garmexport_reader_scrape_ok")}
            assert answered == {"r0": 1.0, "r1": 1.0}, answered
    finally:
        if prometheus is not None:
            stop(prometheus)
        exporter.close()
