"""The reader times its committed position: lag in seconds from the assignment on.

Before any publish after a restart the new owner already knows how old its position is
(the marker stores the Kafka time of the processed position); records held in open files
count as waiting; a caught-up partition lags 0 however old its newest record.
"""

from __future__ import annotations

from garmexport.settings.load import load_config
from garmexport.wire.events import EXPORTED
from garmexport.wire.frames import encode
from garmexport.storage.local import LocalStorage
from tests.pipeline.harness import FakeRecord, Owner

HOUR_MS = 3_600_000
T0_MS = 1_795_300_000_000


def owner(tmp_path):  # noqa: ANN001, ANN201
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
        "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "600",
        "GARMEXPORT_WRITER_IDLE_FLUSH_S": "100000",
    })
    o = Owner(cfg, LocalStorage(str(tmp_path / "out"), "x"))
    o.now = T0_MS / 1000 + 2 * 3600  # the wall clock: two hours after the records' Kafka time
    return o


def records(start: int, n: int, kafka_ms: int) -> list[FakeRecord]:
    t = EXPORTED[0]
    # one record a second from kafka_ms on
    return [FakeRecord(o, encode(t.marker, kafka_ms, b"", b""), kafka_ms + 1000 * (o - start))
            for o in range(start, start + n)]


def test_records_held_in_open_files_lag_from_the_first_one(tmp_path) -> None:  # noqa: ANN001
    o = owner(tmp_path)
    o.coordinator.assign([0])
    o.feed(0, records(0, 300, T0_MS))
    # read up to the high watermark, nothing committed: every record still waits
    assert o.coordinator.oldest_waiting(0, high_watermark=300) == (True, T0_MS)


def test_a_new_owner_knows_the_age_of_its_position_before_reading(tmp_path) -> None:  # noqa: ANN001
    first = owner(tmp_path)
    first.coordinator.assign([0])
    first.feed(0, records(0, 300, T0_MS))
    first.finish()  # published, final marker with the processed position's Kafka time
    assert first.coordinator.oldest_waiting(0, high_watermark=300) == (False, T0_MS + 299_000)

    second = Owner(first.config, first.storage)
    second.now = first.now
    second.coordinator.assign([0])
    # no fetch yet: waiting, timed by the marker (not by the assignment: that is "now")
    assert second.coordinator.oldest_waiting(0, high_watermark=None) == (True, T0_MS + 299_000)
    # the first fetch shows nothing past the position: a quiet partition does not lag
    assert second.coordinator.oldest_waiting(0, high_watermark=300)[0] is False
    # a new record arrives an hour later and sits in an open file
    second.feed(0, records(300, 1, T0_MS + HOUR_MS))
    assert second.coordinator.oldest_waiting(0, high_watermark=301) == (True, T0_MS + HOUR_MS)


def test_update_lag_sets_the_lag_in_offsets_and_in_seconds(tmp_path) -> None:  # noqa: ANN001
    from prometheus_client import CollectorRegistry

    from garmexport.observe.metrics import Metrics

    o = owner(tmp_path)
    registry = CollectorRegistry()
    o.coordinator.metrics = Metrics.create(registry, wall_s=lambda: T0_MS / 1000 + 3600)
    o.coordinator.assign([0])
    o.feed(0, records(0, 300, T0_MS))
    labels = {"topic": o.config.source.topic, "partition": "0"}
    o.coordinator.update_lag(0, high_watermark=None)  # no fetch has shown one: no lag in offsets
    assert registry.get_sample_value("garmexport_consumer_lag_offsets", labels) is None
    o.coordinator.update_lag(0, high_watermark=300)
    # nothing committed: the seek position is the first record, 300 behind the watermark
    assert registry.get_sample_value("garmexport_consumer_lag_offsets", labels) == 300
    # and the oldest of them (Kafka time T0) is an hour old by the metrics' wall clock
    assert registry.get_sample_value("garmexport_consumer_lag_seconds", labels) == 3600
    o.coordinator.update_lag(7, high_watermark=10)  # not assigned: nothing to show
    assert registry.get_sample_value("garmexport_consumer_lag_offsets",
                                     {**labels, "partition": "7"}) is None
