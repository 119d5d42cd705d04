"""The store fails for a while, then recovers: pause, do not spin, do not die, lose nothing.

The output root is the WebHDFS test double (``tests/webhdfs_server.py``), made to answer
every request with 503 for 20 s while records keep arriving. Expected (DESIGN.md
4.9): the exporter pauses its partitions (``paused`` logged), readiness answers 503, the
process neither exits nor burns a core retrying; once the store answers again it resumes,
readiness is back to 200, and every record ends up in the output exactly once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.integration.harness import (
    Exporter, assert_exact, exporter_env, produce, topic_ends, wait_caught_up,
)
from tests.webhdfs_server import WebHdfsServer

RECORDS = 30_000
RATE = 2_000  # records/s: the stream lasts about 15 s and runs through the outage
# The WebHDFS backend retries each call briefly by itself (3 attempts within about a
# second); then the writer sees the failure, the reader pauses, and the exporter's back-off
# (at most STORAGE_RETRY_MAX_S apart) paces the retries. The outage is long enough for
# readiness to show it and for several back-off rounds.
OUTAGE_S = 20.0


def test_a_store_outage_pauses_the_export_without_spinning_and_loses_nothing(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=4)
    server = WebHdfsServer(str(tmp_path / "hdfs")).start()
    root = f"webhdfs://127.0.0.1:{server.server_address[1]}/out"
    env = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=3,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, STORAGE_RETRY_INITIAL_S=0.5,
                       STORAGE_RETRY_MAX_S=2)
    produced: dict = {}
    producer = threading.Thread(target=lambda: produced.update(produce(
        broker.bootstrap, topic, RECORDS, partitions=4, seed=9, days=2, bad_share=0.002,
        rate=RATE)), daemon=True)
    run = Exporter(env, tmp_path, "exporter")
    try:
        producer.start()
        run.wait_event("assigned", timeout_s=60)
        _wait_status(run, 200, timeout_s=20)
        time.sleep(3)  # files are being published

        with server.faults.lock:
            server.faults.fail_503.append((None, 10**9))  # every request fails
        outage_started, cpu_before = time.monotonic(), run.cpu_seconds()
        statuses = []
        while time.monotonic() - outage_started < OUTAGE_S:
            statuses.append(run.http_get("/health/ready")[0])
            assert run.alive(), run.tail()
            time.sleep(0.5)
        cpu_used = run.cpu_seconds() - cpu_before
        outage_s = time.monotonic() - outage_started
        with server.faults.lock:
            server.faults.fail_503.clear()
        print(f"outage {outage_s:.1f} s: exporter CPU {cpu_used:.2f} s; ready answers {statuses}")

        assert run.alive(), run.tail()
        assert 503 in statuses, statuses
        assert cpu_used < 0.5 * outage_s, f"{cpu_used:.2f} s of CPU in a {outage_s:.1f} s outage"
        assert run.events("paused"), run.tail()
        _wait_status(run, 200, timeout_s=60)

        producer.join(timeout=120)
        assert produced.get("failed") == 0, produced
        ends = topic_ends(broker.bootstrap, topic)
        wait_caught_up(root, topic, ends, timeout_s=120, alive=run.check_alive)
        assert run.events("resumed"), run.tail()
        assert run.terminate() == 0, run.tail()
        assert_exact(env, ends)
    except BaseException:
        print(run.tail(60))
        raise
    finally:
        run.close()
        server.stop()


def _wait_status(run: Exporter, status: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (got := run.http_get("/health/ready")[0]) != status:
        run.check_alive()
        assert time.monotonic() < deadline, f"/health/ready stays {got}, not {status}:\n{run.tail()}"
        time.sleep(0.3)

