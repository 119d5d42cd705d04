"""One SparkSession for the Spark tier: local mode, Hive support, embedded Derby in a temp dir.

A session costs 5-7 s and ~1.5 GB: every Spark test shares this one (session scope).
Everything stays in a temp dir and on loopback (components.md, Spark section).
"""

from __future__ import annotations

import logging

import os
from collections.abc import Iterator
from typing import Any

import pytest

from garmexport.compaction.spark_job import build_session

# py4j logs INFO lines from __del__ at interpreter exit, after pytest closed its streams
logging.getLogger("py4j").setLevel(logging.WARNING)


def local_spark_conf(workdir: str) -> dict[str, str]:
    """Spark settings that keep the metastore, warehouse and network local to ``workdir``."""
    return {
        "spark.sql.warehouse.dir": os.path.join(workdir, "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={os.path.join(workdir, 'metastore_db')};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={workdir}",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    }


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # before the JVM starts
    workdir = str(tmp_path_factory.mktemp("spark"))
    session = build_session("local[2]", "", local_spark_conf(workdir))
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One standalone Hive metastore (thrift, Derby in a temp dir) for the session; tests
    that kill it restart it with ``restart_metastore``."""
    from garmexport.testbed.hive_local import start_metastore

    workdir = tmp_path_factory.mktemp("metastore")
    service = start_metastore(workdir)
    service.workdir = workdir  # type: ignore[attr-defined]
    yield service
    service.stop()


def restart_metastore(service: Any) -> None:
    from garmexport.testbed.hive_local import start_metastore

    restarted = start_metastore(service.workdir, service.port)
    service.process = restarted.process


@pytest.fixture(scope="session")
def hiveserver(metastore: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The Spark Thrift Server (HiveServer2) on the session's metastore."""
    from garmexport.testbed.hive_local import start_thrift_server

    service = start_thrift_server(tmp_path_factory.mktemp("thriftserver"),
                                  f"thrift://127.0.0.1:{metastore.port}")
    yield service
    service.stop()
