"""A second SIGTERM ends ``garmexport run`` at once: its last line says so, and what it gave up.

A real exporter holds every record it read in open files (age and idle flushes far off);
the store then refuses every write (``chattr +i``, tests/disk_faults.py), so the clean stop
that a SIGTERM starts cannot publish them and hangs, as it would on a failing store; a
second SIGTERM must end it at once with exit 143, and its last log line must be
``stop_forced`` (WARNING) with the signal, the exit code, the open files it abandoned and
the partitions they belong to. The abandoned work is safe to redo: a second exporter
started on the same output exports every record exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.disk_faults import frozen, require_immutable
from tests.integration.harness import (
    Exporter, export_all_exactly_once, exporter_env, exporter_runs, produce,
)
from tests.integration.test_metrics_e2e import by, scrape

RECORDS = 2_000


def test_a_second_sigterm_logs_what_the_forced_stop_abandoned(broker, tmp_path: Path) -> None:
    require_immutable(tmp_path)
    topic = broker.new_topic(partitions=2)
    root = str(tmp_path / "out")
    produce(broker.bootstrap, topic, RECORDS, partitions=2, seed=7, days=1)
    held = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=100_000,
                        WRITER_IDLE_FLUSH_S=100_000, PROTOCOL_HEARTBEAT_INTERVAL_S=100_000)
    with exporter_runs() as runs:
        run = Exporter(held, tmp_path, "forced")
        runs.append(run)
        run.metrics_port()
        deadline = time.monotonic() + 90
        while sum(by(scrape(run), "garmexport_events_consumed_total", "partition").values()) < RECORDS:
            assert time.monotonic() < deadline, run.tail()
            time.sleep(0.5)
        time.sleep(2.5)  # the writers have handled what was read: their files are open
        with frozen(Path(root)):
            os.kill(run.pid, signal.SIGTERM)
            run.wait_event("stopping", timeout_s=10)
            time.sleep(1.0)
            assert run.alive(), run.tail()  # the stop cannot publish: it goes on
            os.kill(run.pid, signal.SIGTERM)
            code = run.process.wait(timeout=30)
        assert code == 143, run.tail()
        last = json.loads(run.log_path.read_bytes().splitlines()[-1])
        assert last["event"] == "stop_forced" and last["level"] == "WARNING", last
        assert last["why"] == "second SIGTERM" and last["code"] == 143, last
        assert last["open_files"] > 0 and last["partitions"] == [0, 1], last
        assert "not published" in last["abandoned"] and "safe to redo" in last["abandoned"], last

    env = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=1)
    export_all_exactly_once(env, tmp_path, "again")
