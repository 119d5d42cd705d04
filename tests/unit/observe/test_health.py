"""Liveness, readiness and the HTTP endpoints that serve them with /metrics."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from garmexport.observe.health import (
    LIVE_PATH, READY_PATH, Health, HealthServer, serve, stall_of,
)
from garmexport.observe.metrics import Metrics


def ready_health(metrics: Metrics | None = None) -> Health:
    health = Health(live_timeout_s=30, metrics=metrics)
    health.set_assignment(2)
    health.set_writers_healthy(True)
    health.set_store_reachable(True)
    return health


def test_not_live_before_the_first_tick() -> None:
    status = Health(live_timeout_s=30).liveness(now=100.0)
    assert not status.ok and "ticked" in status.reasons[0]


def test_live_up_to_the_timeout_and_not_after() -> None:
    health = Health(live_timeout_s=30)
    health.tick(100.0)
    assert health.liveness(130.0).ok
    late = health.liveness(130.5)
    assert not late.ok and late.http_status == 503 and "30.5s" in late.reasons[0]
    health.tick(131.0)
    assert health.liveness(131.0).ok


def test_not_live_once_the_loop_is_stalled_for_longer_than_the_timeout() -> None:
    health = Health(live_timeout_s=30)
    health.set_stalled(100.0, "StorageError: disk full")
    for now in (100.0, 115.0, 130.0, 131.0):
        health.tick(now)  # ticking, yet the store fails: no progress
        status = health.liveness(now)
        assert status.ok is (now - 100.0 <= 30), (now, status)
    assert "no progress for 31.0s > 30s: StorageError: disk full" in status.reasons[0]
    health.set_stalled(None)
    assert health.liveness(131.0).ok


def test_a_non_positive_timeout_is_refused() -> None:
    with pytest.raises(ValueError):
        Health(live_timeout_s=0)


def test_ready_needs_an_assignment_healthy_writers_and_a_reachable_store() -> None:
    health = ready_health()
    assert health.readiness().ok
    health.set_assignment(None)
    health.set_store_reachable(False, "publish failed: connection refused")
    status = health.readiness()
    assert not status.ok
    assert status.reasons == ("no partition assignment yet", "publish failed: connection refused")
    health.set_assignment(2)
    health.set_store_reachable(True)
    health.set_writers_healthy(False)
    assert health.readiness().reasons == ("writers unhealthy",)


def test_an_unreachable_broker_makes_the_exporter_unready_and_says_why() -> None:
    health = ready_health()
    health.set_broker_problem("all brokers down: 1/1 brokers are down")
    status = health.readiness()
    assert not status.ok
    assert status.reasons == ("broker unreachable: all brokers down: 1/1 brokers are down",)
    health.set_broker_problem("")
    assert health.readiness().ok


def test_a_session_lost_by_a_pause_reads_rejoining_not_broker_unreachable() -> None:
    health = ready_health()
    health.set_rejoining("group session lost (2 partitions): the process was not scheduled")
    status = health.readiness()
    assert not status.ok
    assert status.reasons == (
        "rejoining the group: group session lost (2 partitions): the process was not "
        "scheduled",)
    health.set_rejoining("")
    assert health.readiness().ok


def test_a_detail_note_shows_in_the_ready_body_without_failing_it() -> None:
    # Hive registration failing must not make instances unready (it would stall upgrades).
    health = ready_health()
    health.set_detail("hive", "hive registration failing (3x): connection refused")
    status = health.readiness()
    assert status.ok and json.loads(status.body())["detail"] == {
        "hive": "hive registration failing (3x): connection refused"}
    health.set_detail("hive", "")
    assert "detail" not in json.loads(health.readiness().body())


def test_an_empty_assignment_is_ready() -> None:
    # An extra instance during a rolling upgrade holds no partition and must not stall it.
    health = ready_health()
    health.set_assignment(0)
    assert health.readiness().ok


def test_the_ready_gauge_follows_readiness() -> None:
    registry = CollectorRegistry()
    health = ready_health(Metrics.create(registry))
    assert registry.get_sample_value("garmexport_ready") == 1
    health.set_writers_healthy(False)
    assert registry.get_sample_value("garmexport_ready") == 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def served(clock: FakeClock) -> Iterator[tuple[HealthServer, Health, Metrics]]:
    registry = CollectorRegistry()
    metrics = Metrics.create(registry)
    health = Health(live_timeout_s=10, metrics=metrics)
    server = serve("127.0.0.1", 0, registry, health, clock=clock)
    try:
        yield server, health, metrics
    finally:
        server.close()


def get(server: HealthServer, path: str) -> tuple[int, str, bytes]:
    url = f"http://127.0.0.1:{server.port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], error.read()


def test_port_zero_binds_a_free_port(served) -> None:
    server, _, _ = served
    assert server.port > 0 and server.host == "127.0.0.1"


def test_metrics_endpoint_serves_the_injected_registry(served) -> None:
    server, _, metrics = served
    metrics.exported("fs", 12)
    code, content_type, body = get(server, "/metrics")
    assert code == 200 and content_type.startswith("text/plain")
    assert 'garmexport_events_exported_total{type="fs"} 12.0' in body.decode()


def test_live_endpoint_follows_ticks_and_the_clock(served, clock: FakeClock) -> None:
    server, health, _ = served
    code, content_type, body = get(server, LIVE_PATH)
    assert code == 503 and content_type == "application/json"
    assert json.loads(body) == {"ok": False, "reasons": ["main loop has not ticked yet"]}
    health.tick(clock.now)
    clock.now += 10
    assert get(server, LIVE_PATH)[0] == 200
    clock.now += 1
    assert get(server, LIVE_PATH)[0] == 503


def test_ready_endpoint_names_what_is_missing(served) -> None:
    server, health, _ = served
    health.set_store_reachable(False)
    code, _, body = get(server, READY_PATH)
    assert code == 503
    assert json.loads(body)["reasons"] == ["no partition assignment yet", "store unreachable"]
    health.set_assignment(3)
    health.set_store_reachable(True)
    code, _, body = get(server, READY_PATH)
    assert code == 200 and json.loads(body) == {"ok": True, "reasons": []}


def test_unknown_paths_are_404(served) -> None:
    server, _, _ = served
    assert get(server, "/health")[0] == 404


def test_close_releases_the_port(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    server = serve("127.0.0.1", 0, registry, Health(live_timeout_s=1), clock=clock)
    port = server.port
    server.close()
    again = serve("127.0.0.1", port, registry, Health(live_timeout_s=1), clock=clock)
    again.close()


def test_a_store_failure_episode_is_the_stall_even_with_work_running() -> None:
    assert stall_of(10.0, "OSError: gone", (5.0, "writer fs/1 ...")) == (10.0, "OSError: gone")


def test_without_an_episode_the_longest_running_work_is_the_stall() -> None:
    assert stall_of(None, "", (5.0, "writer fs/1 has been handling one Batch since then")) == (
        5.0, "writer fs/1 has been handling one Batch since then")


def test_nothing_failing_and_nothing_running_is_no_stall() -> None:
    assert stall_of(None, "", None) == (None, "")
