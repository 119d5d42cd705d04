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

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker import Broker, start_broker
from tests.hdfs_cluster import HdfsUnavailable, MiniHdfs, mini_hdfs
from tests.hypothesis_profiles import register
from tests.pushgateway import Pushgateway, PushgatewayUnavailable, pushgateway_server
from tests.system_tools import unavailable
from tests import spark_archive
from tests.tier_times import TierTimes
from tests.seaweed import Seaweed, SeaweedUnavailable, seaweed_server
from tests.webhdfs_server import WebHdfsServer

HYPOTHESIS_PROFILE = register()  # before any test module states its examples

#: JVM flags for every Spark JVM the suite starts (the session's, each compaction process,
#: the reader processes, the Thrift server: spark-submit passes ``SPARK_SUBMIT_OPTS`` to the
#: JVM it launches, and every test process inherits this environment). A test JVM lives
#: seconds on kilobytes of data: the C1 compiler alone and the serial collector cut a
#: compaction process's CPU from about 29 to 17 s (tests/README.md), which is what the
#: Spark tier is bound by on two cores. Production keeps the JVM's defaults (C2 pays off on
#: a day of data); no test measures the JVM's own speed.
TEST_JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
    filter(None, (os.environ.get("SPARK_SUBMIT_OPTS", ""), TEST_JVM_FLAGS)))

_TIERS = ("unit", "pipeline", "integration", "spark", "storage", "hdfs", "bench")
#: Fixtures that run JVMs for the session (or a module), and the pytest-xdist group of the
#: tests that use them. Under ``--dist loadgroup`` (``tox`` runs 4 workers) every worker has
#: its own session, so a fixture would otherwise start once in each worker that runs one
#: of its tests, and keep its share of the two cores busy until the worker ends: the
#: in-process SparkSession (``spark``); the swap reader (``reader``, a Spark JVM sampling
#: the metastore without pause) and its metastore; the standalone metastore and the Thrift
#: server (``metastore``, ``hiveserver``) for the other Hive tests. The first fixture of
#: this list that a test uses names its group.
_JVM_GROUPS = (("spark", "spark"), ("reader", "swap"), ("hiveserver", "hive"),
               ("metastore", "hive"))

#: ``tox -e hdfs`` sets this: the tests on a real HDFS run, and fail where it cannot start.
#: Elsewhere (``tox``) they skip, loudly: the cluster needs Maven to fetch Hadoop's jars,
#: which the README's commands do not install, and its tier has a budget of its own.
HDFS_REQUIRED = bool(os.environ.get("GARMEXPORT_REQUIRE_HDFS"))


_spark_tests = [0]  # how many this run collected (each xdist worker collects them all)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before a worker's first test of a tier that starts Spark JVMs: the class-data archive
    they share (tests/spark_archive.py), made once by whichever worker comes first; not for
    a run of a few Spark tests, which would spend more on making it than it saves."""
    if item.get_closest_marker("spark") and _spark_tests[0] >= spark_archive.WORTH_IT:
        item.user_properties.append((spark_archive.PROPERTY,
                                     spark_archive.ensure(TEST_JVM_FLAGS)))


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
        for fixture, group in _JVM_GROUPS:
            if fixture in item.fixturenames:  # type: ignore[attr-defined]
                item.add_marker(pytest.mark.xdist_group(group))
                break
    _spark_tests[0] = sum(item.get_closest_marker("spark") is not None for item in items)


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


@pytest.fixture(scope="session")
def real_hdfs() -> Iterator[MiniHdfs]:
    """One real HDFS (a NameNode, two DataNodes, WebHDFS) for the session, started once;
    runs only under ``tox -e hdfs`` (GARMEXPORT_REQUIRE_HDFS), skips elsewhere.

    Not one xdist group: its tests mostly wait (group joins, streams at a set rate), so
    ``tox -e hdfs`` spreads them over workers, each starting its own cluster (about 12 s
    and 0.5 GB), rather than running them all one after the other on one worker."""
    yield from hdfs_for_fixture()


def hdfs_for_fixture(**kwargs: Any) -> Iterator[MiniHdfs]:
    """A fixture's :func:`mini_hdfs` (``kwargs`` go to it): skipped outside ``tox -e hdfs``
    (GARMEXPORT_REQUIRE_HDFS unset), failed there when the cluster cannot start."""
    if not HDFS_REQUIRED:
        pytest.skip("real HDFS tests run in `tox -e hdfs` (GARMEXPORT_REQUIRE_HDFS unset)")
    try:
        ctx = mini_hdfs(**kwargs)
        cluster = ctx.__enter__()
    except HdfsUnavailable as exc:
        pytest.fail(f"a real HDFS cannot start here: {exc}")
    try:
        yield cluster
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
