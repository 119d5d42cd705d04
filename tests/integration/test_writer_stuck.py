"""A store call that never returns: liveness fails, as it did before the worker threads.

With the writers on pool threads, the reader's thread keeps ticking while a writer waits
on the store, so ticks alone no longer prove progress. The output root is the WebHDFS
double, made to hold the RENAME that publishes each data file unanswered (a NameNode that
accepts the connection and never replies, with a socket timeout longer than the test). ``/health/live`` must answer
503 once one writer message has run for longer than the live timeout, naming the
writer; when the store answers again it is 200 again and every record is there once. One
key sets that timeout on both paths (``metrics.live_timeout_s``, issue 40): here a small
one, which one process and an instance of readers must both keep to.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.harness import (
    Exporter, assert_exact, exporter_env, produce, topic_ends, wait_caught_up,
)
from tests.webhdfs_server import WebHdfsServer

#: metrics.live_timeout_s here (the default is 30 s); above 10 x the default poll timeout
LIVE_TIMEOUT_S = 8.0


def _live(run: Exporter) -> tuple[int, dict]:
    code, body = run.http_get("/health/live")
    return code, json.loads(body)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_writer_stuck_in_a_store_call_fails_liveness_and_recovers(
        broker, tmp_path: Path, parallelism: int) -> None:
    """The same with one process and with an instance of two readers (the default path),
    whose supervisor's liveness folds its readers' and names the stuck one."""
    topic = broker.new_topic(partitions=2)
    server = WebHdfsServer(str(tmp_path / "hdfs")).start()
    root = f"webhdfs://127.0.0.1:{server.server_address[1]}/out"
    env = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=1,
                       OUTPUT_HDFS_TIMEOUT_S=300, ACTORS_CORES=2,
                       ACTORS_PARALLELISM=parallelism, METRICS_LIVE_TIMEOUT_S=LIVE_TIMEOUT_S)
    produce(broker.bootstrap, topic, 5_000, partitions=2, seed=3, days=1)
    ends = topic_ends(broker.bootstrap, topic)
    run = Exporter(env, tmp_path, f"exporter-{parallelism}")
    try:
        run.wait_event("assigned", timeout_s=60, count=parallelism)
        assert _live(run)[0] == 200
        with server.faults.lock:
            # publishing a data or quarantine file renames it into place: those hang,
            # the markers' (on the reader's thread) do not
            server.faults.hold.append(("RENAME", "/_offsets/"))
        held_at = time.monotonic()
        answers = []
        while time.monotonic() - held_at < LIVE_TIMEOUT_S + 20:
            code, body = _live(run)
            answers.append((round(time.monotonic() - held_at, 1), code))
            if code == 503:
                break
            assert run.alive(), run.tail()
            time.sleep(1)
        stuck_for = time.monotonic() - held_at
        print(f"liveness answers while publishes hang: {answers}")
        assert code == 503, answers
        assert stuck_for >= LIVE_TIMEOUT_S - 1, answers  # not before the timeout
        assert any(f"> {LIVE_TIMEOUT_S:g}s" in r for r in body["reasons"]), body  # the key's
        assert any("writer" in r for r in body["reasons"]), body
        if parallelism > 1:  # the fold names the reader whose writer is stuck
            assert all(r.startswith(("r0: ", "r1: ")) for r in body["reasons"]), body

        server.faults.released.set()
        with server.faults.lock:
            server.faults.hold.clear()
        deadline = time.monotonic() + 60
        while _live(run)[0] != 200:
            assert time.monotonic() < deadline, run.tail()
            time.sleep(0.5)
        wait_caught_up(root, topic, ends, timeout_s=120, alive=run.check_alive)
        assert run.terminate() == 0, run.tail()
        assert_exact(env, ends)
    except BaseException:
        print(run.tail(40))
        raise
    finally:
        run.close()
        server.faults.released.set()
        server.stop()
