"""Shared fixtures: the real broker, and tier markers taken from the test's directory.

``broker`` is one tansu process per test session (tests isolate themselves by topic:
``broker.new_topic()``); ``own_broker`` is a fresh process for one test, for tests that
stop or restart the broker. ``seaweed`` is one real SeaweedFS (S3) server per session,
shared by the storage conformance suite and the S3 end-to-end runs. ``pushgateway`` is a
real Prometheus Pushgateway per test (compaction reports); ``webhdfs`` the WebHDFS test
double per test. Tests under ``tests/<tier>/`` get
the ``<tier>`` marker, so ``pytest -m "not spark"`` selects by what a test needs. Hypothesis
runs the quick ``dev`` profile locally and the thorough ``ci`` one when ``CI`` is set
(``tests/hypothesis_profiles.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker import Broker, start_broker
from tests.hypothesis_profiles import register
from tests.pushgateway import Pushgateway, PushgatewayUnavailable, pushgateway_server
from tests.system_tools import unavailable
from tests.tier_times import TierTimes
from tests.seaweed import Seaweed, SeaweedUnavailable, seaweed_server
from tests.webhdfs_server import WebHdfsServer

HYPOTHESIS_PROFILE = register()  # before any test module states its examples

_TIERS = ("unit", "pipeline", "integration", "spark", "storage", "bench")
#: Session fixtures that run a Spark JVM (5-15 s and about 1.5 GB each). Under pytest-xdist
#: every worker has its own session, so with ``--dist loadgroup`` (``tox -- -n 4 --dist
#: loadgroup``; ``tox`` itself runs serially) the tests that use one go to one worker and
#: each starts once per run, not once per worker. The
#: standalone metastore (``metastore``, a lighter JVM) starts once in each worker that needs
#: it: the tests that share it take half the suite's time, too long for one worker.
_SPARK_FIXTURES = ("spark", "hiveserver")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) only
        config.pluginmanager.register(TierTimes(), "tier_times")


# First: pytest-xdist reads the ``xdist_group`` marks in its own hook of the same name (it
# renames each item's node id after its group), so they must be there before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.path)).parts
        for tier in _TIERS:
            if tier in parts[-3:-1]:
                item.add_marker(getattr(pytest.mark, tier))
        for name in _SPARK_FIXTURES:
            if name in item.fixturenames:  # type: ignore[attr-defined]
                item.add_marker(pytest.mark.xdist_group(name))
                break


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The session's tansu broker; create a topic per test with ``broker.new_topic()``."""
    running = start_broker(tmp_path_factory.mktemp("broker"))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[Broker]:
    """A tansu broker for this test alone (it may stop or kill it)."""
    running = start_broker(tmp_path / "broker")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def seaweed() -> Iterator[Seaweed]:
    """One real SeaweedFS server (S3) for the session; skips if it cannot start here."""
    try:
        ctx = seaweed_server()
        server = ctx.__enter__()
    except SeaweedUnavailable as exc:
        pytest.skip(f"SeaweedFS cannot start here, S3 tests skipped: {exc}")
    try:
        yield server
    finally:
        ctx.__exit__(None, None, None)


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[Pushgateway]:
    """A real Prometheus Pushgateway for this test; skips (loudly) if it is not installed."""
    try:
        ctx = pushgateway_server(tmp_path)
        server = ctx.__enter__()
    except PushgatewayUnavailable as exc:
        unavailable(f"Pushgateway cannot start here: {exc}")
    try:
        yield server
    finally:
        ctx.__exit__(None, None, None)


@pytest.fixture
def webhdfs(tmp_path: Path) -> Iterator[WebHdfsServer]:
    """The WebHDFS protocol double (tests/webhdfs_server.py) serving a fresh directory."""
    server = WebHdfsServer(str(tmp_path / "hdfs")).start()
    try:
        yield server
    finally:
        server.stop()
