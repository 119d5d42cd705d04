"""The metrics vocabulary: each method moves the series it documents, on its own registry."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from garmexport.observe.metrics import Metrics


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> Metrics:
    return Metrics.create(registry)


def value(registry: CollectorRegistry, name: str, **labels: object) -> float | None:
    return registry.get_sample_value(name, {k: str(v) for k, v in labels.items()})


def test_two_registries_do_not_share_series() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    Metrics.create(first).consumed("garmadon", 0, 5)
    Metrics.create(second)
    assert value(first, "garmexport_events_consumed_total", topic="garmadon", partition=0) == 5
    assert value(second, "garmexport_events_consumed_total", topic="garmadon", partition=0) is None


def test_flow_counters_count_per_label(registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.consumed("garmadon", 2, 100)
    metrics.consumed("garmadon", 2, 50)
    metrics.exported("fs", 120)
    metrics.not_exported(3, 7)
    metrics.already_committed("fs", 2, 23)
    metrics.quarantined("_frame", "short_head", 2)
    assert value(registry, "garmexport_events_consumed_total", topic="garmadon", partition=2) == 150
    assert value(registry, "garmexport_events_exported_total", type="fs") == 120
    assert value(registry, "garmexport_events_not_exported_total", marker=3) == 7
    assert value(registry, "garmexport_events_already_committed_total", type="fs", partition=2) == 23
    assert value(registry, "garmexport_quarantined_total", type="_frame", reason="short_head") == 2


def test_a_published_file_counts_rows_files_bytes_and_duration(
        registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.published("fs", "data", rows=1000, nbytes=4096, duration_s=0.2)
    metrics.published("fs", "data", rows=10, nbytes=100, duration_s=3.0)
    labels = {"type": "fs", "kind": "data"}
    assert value(registry, "garmexport_rows_published_total", **labels) == 1010
    assert value(registry, "garmexport_files_published_total", **labels) == 2
    assert value(registry, "garmexport_bytes_published_total", **labels) == 4196
    assert value(registry, "garmexport_publish_duration_seconds_count", kind="data") == 2
    assert value(registry, "garmexport_publish_duration_seconds_bucket", kind="data", le="0.25") == 1


@pytest.mark.parametrize("call", [
    lambda m: m.published("fs", "parquet", rows=1, nbytes=1, duration_s=0.1),
    lambda m: m.rebalance("join"),
    lambda m: m.recovered("boot", 1.0),
])
def test_an_unknown_kind_is_refused(metrics: Metrics, call) -> None:
    with pytest.raises(ValueError):
        call(metrics)


def test_committed_offset_and_event_time_only_move_forward(
        registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.committed("fs", 1, last_offset=3000, newest_event_s=1_800_000_000.0)
    # A late file of an older day: lower offsets, older events.
    metrics.committed("fs", 1, last_offset=1500, newest_event_s=1_700_000_000.0)
    assert value(registry, "garmexport_committed_offset", type="fs", partition=1) == 3000
    assert value(registry, "garmexport_last_committed_event_timestamp_seconds",
                 type="fs", partition=1) == 1_800_000_000.0


def test_lag_is_high_watermark_minus_position_and_never_negative(
        registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.set_lag("garmadon", 0, high_watermark=1000, position=400)
    metrics.set_lag("garmadon", 1, high_watermark=10, position=12)
    assert value(registry, "garmexport_consumer_lag_offsets", topic="garmadon", partition=0) == 600
    assert value(registry, "garmexport_consumer_lag_offsets", topic="garmadon", partition=1) == 0


def test_a_heartbeat_counts_as_a_marker_and_a_heartbeat(
        registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.marker_written(4, heartbeat=False)
    metrics.marker_written(4, heartbeat=True)
    assert value(registry, "garmexport_markers_written_total", partition=4) == 2
    assert value(registry, "garmexport_heartbeats_total", partition=4) == 1


def test_trouble_counters(registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.storage_failure("publish")
    metrics.storage_failure("publish")
    metrics.storage_retry("publish")
    metrics.fencing_conflict(7)
    metrics.rebalance("lost")
    metrics.recovered("assign", 0.4)
    assert value(registry, "garmexport_storage_failures_total", op="publish") == 2
    assert value(registry, "garmexport_storage_retries_total", op="publish") == 1
    assert value(registry, "garmexport_fencing_conflicts_total", partition=7) == 1
    assert value(registry, "garmexport_rebalances_total", kind="lost") == 1
    assert value(registry, "garmexport_recovery_duration_seconds_sum", kind="assign") == 0.4


def test_the_process_collector_is_on_the_injected_registry(registry: CollectorRegistry,
                                                           metrics: Metrics) -> None:
    assert value(registry, "process_resident_memory_bytes") > 10_000_000
    assert value(registry, "process_open_fds") >= 3
    assert value(registry, "process_max_fds") > 0
    assert value(registry, "process_cpu_seconds_total") > 0
    assert value(registry, "process_start_time_seconds") > 1_700_000_000


def test_gauges_hold_the_last_snapshot(registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.set_writers(writers=3, files=5, buffered_bytes=10_000, oldest_age_s=42.5)
    metrics.set_partitions(assigned=4, paused=1)
    metrics.set_watermark("jvm_gc", 0, 99)
    metrics.set_ready(True)
    assert value(registry, "garmexport_open_writers") == 3
    assert value(registry, "garmexport_open_files") == 5
    assert value(registry, "garmexport_buffered_bytes") == 10_000
    assert value(registry, "garmexport_oldest_open_file_age_seconds") == 42.5
    assert value(registry, "garmexport_assigned_partitions") == 4
    assert value(registry, "garmexport_paused_partitions") == 1
    assert value(registry, "garmexport_low_watermark_offset", type="jvm_gc", partition=0) == 99
    assert value(registry, "garmexport_ready") == 1


def test_up_and_build_info_are_set_at_creation(registry: CollectorRegistry, metrics: Metrics) -> None:
    assert value(registry, "garmexport_up") == 1
    assert value(registry, "garmexport_ready") == 0
    info = [s for f in registry.collect() if f.name == "garmexport_build" for s in f.samples]
    assert info and info[0].labels["version"]
    metrics.set_up(False)
    assert value(registry, "garmexport_up") == 0


def test_forgetting_a_partition_drops_its_gauges_and_keeps_the_others(
        registry: CollectorRegistry, metrics: Metrics) -> None:
    for partition in (0, 1):
        metrics.set_lag("garmadon", partition, 100, 50)
        metrics.set_watermark("fs", partition, 10)
        metrics.committed("fs", partition, 20, 1_700_000_000.0)
        metrics.consumed("garmadon", partition, 1)
    metrics.forget_partition("garmadon", 0)
    for name, labels in [("garmexport_consumer_lag_offsets", {"topic": "garmadon"}),
                         ("garmexport_low_watermark_offset", {"type": "fs"}),
                         ("garmexport_committed_offset", {"type": "fs"}),
                         ("garmexport_last_committed_event_timestamp_seconds", {"type": "fs"})]:
        assert value(registry, name, partition=0, **labels) is None, name
        assert value(registry, name, partition=1, **labels) is not None, name
    assert value(registry, "garmexport_events_consumed_total", topic="garmadon", partition=0) == 1
    # A new owner starts from its own state, not from the forgotten maximum.
    metrics.committed("fs", 0, 5, 1_600_000_000.0)
    assert value(registry, "garmexport_committed_offset", type="fs", partition=0) == 5


def test_an_assigned_partition_shows_its_counters_at_zero(
        registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.assign_partition("garmadon", 5)
    assert value(registry, "garmexport_events_consumed_total", topic="garmadon", partition=5) == 0
    for name in ("garmexport_fencing_conflicts_total", "garmexport_markers_written_total",
                 "garmexport_heartbeats_total"):
        assert value(registry, name, partition=5) == 0, name
