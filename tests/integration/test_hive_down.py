"""A metastore that is down is an expected, handled condition: no ERROR line in the log.

A real ``garmexport run`` against the real broker, with ``hive.metastore_uri`` pointing at
a loopback port nothing listens on (a metastore that is down refuses connections the same
way). Registration fails round after round and says so in its own WARNING
``hive_register_failed``; the thrift library's lines ("Could not connect to any of ...",
logged at ERROR by ``thrift.transport.TSocket``) must come through as ``thrift_log``
events at WARNING at most, each message once per minute with the repeats counted, and
never as ERROR lines that would trip log-based alerting. Readiness stays 200 and names the
failing registration in its detail.

The same with one process and with an instance of two readers (the default path): each
reader registers the days it publishes through its own metastore client, so each says so
and relays thrift's line once itself; the supervisor's readiness keeps both readers'
details (``r0.hive``, ``r1.hive``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.broker import free_port
from tests.integration.harness import (
    Exporter, exporter_env, exporter_runs, produce, topic_ends, wait_caught_up,
)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_metastore_down_logs_no_error_and_relays_thrift_lines_rate_limited(
        broker, tmp_path: Path, parallelism: int) -> None:
    topic = broker.new_topic(partitions=2)
    root = tmp_path / "out"
    produce(broker.bootstrap, topic, 1000, partitions=2, seed=2, days=1)
    env = exporter_env(broker.bootstrap, topic, str(root),
                       HIVE_METASTORE_URI=f"thrift://127.0.0.1:{free_port()}",
                       HIVE_REGISTER_DELAY_S=0.2, HIVE_RETRY_MAX_S=1, HIVE_TIMEOUT_S=2,
                       ACTORS_PARALLELISM=parallelism)
    # one process, or each reader (its own partition, day and metastore client)
    readers = [f"r{k}" for k in range(parallelism)] if parallelism > 1 else [None]
    with exporter_runs() as runs:
        run = Exporter(env, tmp_path, f"hive-down-{parallelism}")
        runs.append(run)
        run.wait_event("assigned", timeout_s=60, count=parallelism)
        wait_caught_up(str(root), topic, topic_ends(broker.bootstrap, topic), 120, run.check_alive)
        for reader in readers:
            run.wait_event("hive_register_failed", timeout_s=60, count=4,
                           where=lambda d, r=reader: d.get("reader") == r)
        lines = run.events()
        errors = [d for d in lines if logging.getLevelName(d["level"]) >= logging.ERROR]
        assert errors == [], errors
        assert not [d for d in lines if d["logger"].startswith("thrift")], "raw thrift lines"
        relayed = [d for d in lines if d["event"] == "thrift_log"]
        for reader in readers:
            could_not = [d for d in relayed if "Could not connect to any of" in d["message"]
                         and d.get("reader") == reader]
            # one per minute, although every one of the 4+ rounds logged it
            assert len(could_not) == 1 and could_not[0]["level"] == "WARNING", (reader, relayed)
            assert could_not[0]["thrift_logger"] == "thrift.transport.TSocket", could_not
        assert all(d["level"] in ("WARNING", "DEBUG") for d in relayed), relayed
        status, body = run.http_get("/health/ready")
        assert status == 200  # the export is fine; registration is behind
        # and says so in the detail: with readers, each one's, named by the supervisor
        detail = json.loads(body)["detail"]
        for reader in readers:
            note = detail[f"{reader}.hive" if reader else "hive"]
            assert note.startswith("hive registration failing"), detail
        assert run.terminate() == 0, run.tail()
