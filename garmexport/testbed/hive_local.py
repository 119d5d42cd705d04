"""Local Hive services from the jars pip's pyspark ships: for the demo and the tests.

- :func:`start_metastore`: a standalone Hive metastore thrift server (``HiveMetaStore``,
  Hive 2.3) backed by Derby in ``workdir`` (schema created on first start), on a loopback
  port: what ``hive.metastore_uri`` points at.
- :func:`start_thrift_server`: the Spark Thrift Server (HiveServer2 protocol) against that
  metastore, the endpoint ``beeline`` and JDBC/ODBC clients use.
- :func:`beeline`: run SQL through HiveServer2 with pyspark's ``beeline`` script, as a
  user would; rows come back as lists of strings.

Everything stays in ``workdir`` and on 127.0.0.1. Each service is one JVM; :meth:`stop`
ends it (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import csv
import io
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from garmexport.testbed.embedded_broker import free_port

_SITE = """<?xml version="1.0"?>
<configuration>
{}
</configuration>
"""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _site(props: dict[str, str]) -> str:
    return _SITE.format("\n".join(f"  <property><name>{escape(k)}</name>"
                                  f"<value>{escape(v)}</value></property>"
                                  for k, v in props.items()))


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 1.0).close()
        return True
    except OSError:
        return False


class JavaService:
    """One JVM serving on ``port``; its output goes to ``log``."""

    def __init__(self, name: str, args: list[str], port: int, log: Path,
                 env: dict[str, str]) -> None:
        self.name, self.args, self.port, self.log, self.env = name, args, port, log, env
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 180.0) -> JavaService:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(self.args, env=self.env, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not _port_open(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{self.name} did not start on port {self.port}:\n{tail}")
            time.sleep(0.5)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        p, self.process = self.process, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self.process = None


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}


def start_metastore(workdir: Path, port: int = 0, timeout_s: float = 180.0,
                    classpath: Sequence[str] = (), site: Mapping[str, str] | None = None
                    ) -> JavaService:
    """A Derby-backed metastore in ``workdir`` on ``port`` (0: a free one); call again with
    the same ``workdir`` and port to restart it with its catalog.

    ``classpath`` adds jars after pyspark's and ``site`` properties to its
    ``hive-site.xml``: a metastore looks at the location of every table and partition it
    is given (it makes a missing one), so tables on ``s3a://`` need S3A's jars and the
    bucket's ``fs.s3a.*`` settings here too."""
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "metastore-conf"
    conf.mkdir(exist_ok=True)
    (conf / "hive-site.xml").write_text(_site({
        "javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={workdir / 'metastore_db'};create=true",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": f"file://{workdir / 'warehouse'}",
        # Hive's default async logging needs a jar pyspark does not ship (LMAX disruptor)
        "hive.async.log.enabled": "false",
        **(site or {}),
    }))
    port = port or free_port()
    jars = ":".join([f"{spark_home() / 'jars'}/*", *classpath])
    args = ["java", "-Xmx512m", f"-Dderby.system.home={workdir}", "-cp", f"{conf}:{jars}",
            "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port)]
    return JavaService("hive metastore", args, port, workdir / "metastore.log",
                       _env()).start(timeout_s)


def start_thrift_server(workdir: Path, metastore_uri: str, timeout_s: float = 240.0
                        ) -> JavaService:
    """The Spark Thrift Server (local[1]) on a free loopback port, using ``metastore_uri``."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    home = spark_home()
    conf = {
        "spark.hadoop.hive.metastore.uris": metastore_uri,
        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={workdir}",
        "spark.ui.enabled": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        # day=2026-11-01 stays a string, as the tables declare it
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        # list a partition's files on every query: the exporter adds files all day and
        # compaction swaps them, so a cached listing would be stale
        "spark.sql.hive.filesourcePartitionFileCacheSize": "0",
    }
    args = [str(home / "bin" / "spark-submit"), "--master", "local[1]",
            "--driver-memory", "768m", "--class",
            "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"]
    for k, v in conf.items():
        args += ["--conf", f"{k}={v}"]
    args += ["spark-internal", "--hiveconf", f"hive.server2.thrift.port={port}",
             "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1"]
    env = {**_env(), "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(workdir)}
    return JavaService("spark thrift server", args, port, workdir / "thriftserver.log",
                       env).start(timeout_s)


def beeline(port: int, sql: str, timeout_s: float = 300.0) -> list[list[str]]:
    """Rows (without the header) of one SQL statement run through HiveServer2 on ``port``
    by pyspark's ``beeline``; RuntimeError if beeline fails."""
    home = spark_home()
    done = subprocess.run(
        [str(home / "bin" / "beeline"), "-u", f"jdbc:hive2://127.0.0.1:{port}/default",
         "-n", os.environ.get("USER") or "garmexport", "--silent=true",
         "--outputformat=csv2", "-e", sql],
        env={**_env(), "SPARK_HOME": str(home)}, capture_output=True, text=True,
        timeout=timeout_s)
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"beeline exited {done.returncode} for {sql!r}:\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return list(csv.reader(io.StringIO("\n".join(lines[1:]))))
