"""Lag in seconds from a real exporter: 0 when caught up, the age of what waits otherwise.

The records carry Kafka times of early November (the generator's fixed clock), weeks
before the wall clock of the test. One exporter catches up and publishes everything:
every partition must report ``garmexport_consumer_lag_seconds`` 0, although the newest
committed event is weeks old (the former PromQL lag, ``time()`` minus that, would page).
More records then arrive, and a second exporter starts with a flush policy that holds
them in open files (nothing is committed: a process stuck before its first publish): it
must report, before any publish, a lag of weeks on every partition that has records
waiting, while the committed-event gauge has no series at all.

On an empty topic both lag gauges exist and read 0 at every scrape from the assignment
on (they read 0.96 s and nothing at the first scrape, when they waited for a fetch to show
the high watermark).
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.harness import (
    Exporter, exporter_env, exporter_runs, produce, topic_ends, wait_caught_up,
)
from tests.integration.test_metrics_e2e import by, scrape

PARTITIONS = 2
WEEK_S = 7 * 86_400


def lag_seconds(exporter: Exporter, want: int, timeout_s: float = 60.0) -> dict[str, float]:
    """The lag per partition once every partition reports one and the predicate holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        lag = by(scrape(exporter), "garmexport_consumer_lag_seconds", "partition")
        if len(lag) == want:
            return dict(lag)
        assert time.monotonic() < deadline, (dict(lag), exporter.tail())
        time.sleep(0.2)


def test_caught_up_is_zero_and_a_stuck_start_reports_the_age_of_what_waits(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    root = str(tmp_path / "out")
    produce(broker.bootstrap, topic, 2_000, partitions=PARTITIONS, seed=3, days=1)
    ends = topic_ends(broker.bootstrap, topic)

    env = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1)
    first = Exporter(env, tmp_path, "caught-up")
    try:
        first.metrics_port()
        wait_caught_up(root, topic, ends, 120, first.check_alive)
        deadline = time.monotonic() + 30
        while True:
            samples = scrape(first)
            lag = by(samples, "garmexport_consumer_lag_seconds", "partition")
            if len(lag) == PARTITIONS and not any(lag.values()):
                break
            assert time.monotonic() < deadline, (dict(lag), first.tail())
            time.sleep(0.5)
        newest = max(v for _, v in samples["garmexport_last_committed_event_timestamp_seconds"])
        assert time.time() - newest > WEEK_S, "the records must be old for this test to mean anything"
        assert first.terminate() == 0
    finally:
        first.close()

    produce(broker.bootstrap, topic, 500, partitions=PARTITIONS, seed=4, days=1)
    held = Exporter(exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=100_000,
                                 WRITER_IDLE_FLUSH_S=100_000, PROTOCOL_HEARTBEAT_INTERVAL_S=100_000),
                    tmp_path, "held")
    try:
        held.metrics_port()
        held.wait_event("assigned", timeout_s=60)
        deadline = time.monotonic() + 60
        while True:  # the records are read (into open files), nothing is published
            samples = scrape(held)
            consumed = by(samples, "garmexport_events_consumed_total", "partition")
            if sum(consumed.values()) == 500:
                break
            assert time.monotonic() < deadline, (dict(consumed), held.tail())
            time.sleep(0.5)
        lag = lag_seconds(held, PARTITIONS)
        assert "garmexport_last_committed_event_timestamp_seconds" not in samples
        waiting = [p for p, n in consumed.items() if n]
        assert waiting
        for p in waiting:
            assert lag[p] > WEEK_S, (lag, held.tail())
        time.sleep(2.0)  # it keeps growing with the wall clock
        later = lag_seconds(held, PARTITIONS)
        assert all(later[p] >= lag[p] + 1.5 for p in waiting), (lag, later)
    finally:
        held.close()


def test_on_an_empty_topic_both_lags_read_0_at_every_scrape_from_the_assignment_on(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"))
    with exporter_runs() as runs:
        run = Exporter(env, tmp_path, "empty")
        runs.append(run)
        run.metrics_port()
        run.wait_event("assigned", timeout_s=60)
        scrapes = []
        until = time.monotonic() + 3.0  # past the first ticks and fetches
        while time.monotonic() < until:
            samples = scrape(run)
            scrapes.append((dict(by(samples, "garmexport_consumer_lag_offsets", "partition")),
                            dict(by(samples, "garmexport_consumer_lag_seconds", "partition"))))
            time.sleep(0.05)
        every = {str(p): 0.0 for p in range(PARTITIONS)}
        wrong = [s for s in scrapes if s != (every, every)]
        assert not wrong, (len(wrong), len(scrapes), wrong[:3])
