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

Both with one process and with an instance of two readers (the default path): the
supervisor's ``/metrics`` joins its readers' series, each partition's under the reader
that holds it (``reader`` label), so every partition still has one lag series, and the
consumed counts of both readers sum to what was produced.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.harness import (
    Exporter, exporter_env, exporter_runs, produce, topic_ends, wait_caught_up,
)
from tests.integration.test_metrics_e2e import by, scrape

PARTITIONS = 2
WEEK_S = 7 * 86_400


def owners(samples: dict, name: str) -> Counter:
    """How many series of ``name`` each (partition, reader) has: with readers, a
    partition's only under the reader that holds it."""
    return Counter((lab["partition"], lab.get("reader")) for lab, _ in samples.get(name, []))


def one_owner_each(samples: dict, name: str, parallelism: int) -> bool:
    """Every partition has exactly one series of ``name``; with readers, every reader
    holds a partition (range assignment: one each of the two)."""
    held = owners(samples, name)
    partitions = Counter(p for p, _ in held.elements())
    if partitions != Counter({str(p): 1 for p in range(PARTITIONS)}):
        return False
    return parallelism == 1 or {r for _, r in held} == {f"r{k}" for k in range(parallelism)}


def lag_seconds(exporter: Exporter, want: int, timeout_s: float = 60.0) -> dict[str, float]:
    """The lag per partition once every partition reports one and the predicate holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        lag = by(scrape(exporter), "garmexport_consumer_lag_seconds", "partition")
        if len(lag) == want:
            return dict(lag)
        assert time.monotonic() < deadline, (dict(lag), exporter.tail())
        time.sleep(0.2)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_caught_up_is_zero_and_a_stuck_start_reports_the_age_of_what_waits(
        broker, tmp_path: Path, parallelism: int) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    root = str(tmp_path / "out")
    produce(broker.bootstrap, topic, 2_000, partitions=PARTITIONS, seed=3, days=1)
    ends = topic_ends(broker.bootstrap, topic)

    env = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, ACTORS_PARALLELISM=parallelism)
    first = Exporter(env, tmp_path, f"caught-up-{parallelism}")
    try:
        first.metrics_port()
        first.wait_event("assigned", timeout_s=60, count=parallelism)
        wait_caught_up(root, topic, ends, 120, first.check_alive)
        deadline = time.monotonic() + 30
        while True:
            samples = scrape(first)
            lag = by(samples, "garmexport_consumer_lag_seconds", "partition")
            if len(lag) == PARTITIONS and not any(lag.values()):
                break
            assert time.monotonic() < deadline, (dict(lag), first.tail())
            time.sleep(0.5)
        assert one_owner_each(samples, "garmexport_consumer_lag_seconds", parallelism), \
            owners(samples, "garmexport_consumer_lag_seconds")
        newest = max(v for _, v in samples["garmexport_last_committed_event_timestamp_seconds"])
        assert time.time() - newest > WEEK_S, "the records must be old for this test to mean anything"
        assert first.terminate() == 0
    finally:
        first.close()

    produce(broker.bootstrap, topic, 500, partitions=PARTITIONS, seed=4, days=1)
    # a group of its own: the first instance's readers left theirs together, and tansu may
    # keep one of them, stalling the next join (harness.exporter_env, DESIGN.md 9.8); the
    # output, not the group, says where to resume
    held = Exporter(exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=100_000,
                                 WRITER_IDLE_FLUSH_S=100_000, PROTOCOL_HEARTBEAT_INTERVAL_S=100_000,
                                 ACTORS_PARALLELISM=parallelism, SOURCE_GROUP_ID=f"held-{topic}"),
                    tmp_path, f"held-{parallelism}")
    try:
        held.metrics_port()
        held.wait_event("assigned", timeout_s=60, count=parallelism)
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
        if parallelism > 1:  # the sum is over both readers, each of which read its share
            per_reader = by(samples, "garmexport_events_consumed_total", "reader")
            assert set(per_reader) == {"r0", "r1"} and all(per_reader.values()), per_reader
        time.sleep(2.0)  # it keeps growing with the wall clock
        later = lag_seconds(held, PARTITIONS)
        assert all(later[p] >= lag[p] + 1.5 for p in waiting), (lag, later)
        assert one_owner_each(scrape(held), "garmexport_consumer_lag_seconds", parallelism)
    finally:
        held.close()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_on_an_empty_topic_both_lags_read_0_at_every_scrape_from_the_assignment_on(
        broker, tmp_path: Path, parallelism: int) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"),
                       ACTORS_PARALLELISM=parallelism)
    with exporter_runs() as runs:
        run = Exporter(env, tmp_path, f"empty-{parallelism}")
        runs.append(run)
        run.metrics_port()
        run.wait_event("assigned", timeout_s=60, count=parallelism)
        scrapes, split = [], []
        until = time.monotonic() + 3.0  # past the first ticks and fetches
        while time.monotonic() < until:
            samples = scrape(run)
            scrapes.append((dict(by(samples, "garmexport_consumer_lag_offsets", "partition")),
                            dict(by(samples, "garmexport_consumer_lag_seconds", "partition"))))
            # with readers: each partition's two series under its one reader, every scrape
            split.append(all(one_owner_each(samples, name, parallelism) for name in (
                "garmexport_consumer_lag_offsets", "garmexport_consumer_lag_seconds")))
            time.sleep(0.05)
        every = {str(p): 0.0 for p in range(PARTITIONS)}
        wrong = [s for s in scrapes if s != (every, every)]
        assert not wrong, (len(wrong), len(scrapes), wrong[:3])
        assert all(split), (split.count(False), len(split))
