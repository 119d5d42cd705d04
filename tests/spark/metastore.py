"""A real standalone Hive metastore (thrift) for tests, from the jars pip's pyspark ships.

:func:`start_metastore` runs ``org.apache.hadoop.hive.metastore.HiveMetaStore`` (Hive 2.3,
as bundled in ``pyspark/jars``) with an embedded Derby database in the test's directory and
returns once its port accepts connections. It stands in for a cluster's
``thrift://metastore:9083``: garmexport talks to it through Spark's Hive client exactly as
it would to the real one.

What bites: the metastore's log4j setup wants async loggers (a class missing from the jars)
unless ``hive.async.log.enabled`` is false; Hive 2.3 has no setting for the address the
metastore binds, so it listens on every interface (on a free port, for the test's life).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from garmexport.testbed.embedded_broker import free_port

READY_TIMEOUT_S = 180.0  # ~30 s on a loaded 2-core machine

_SITE = """<configuration>
<property><name>javax.jdo.option.ConnectionURL</name>
  <value>jdbc:derby:;databaseName={db};create=true</value></property>
<property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
<property><name>hive.metastore.schema.verification</name><value>false</value></property>
<property><name>hive.metastore.warehouse.dir</name><value>file://{warehouse}</value></property>
<property><name>hive.async.log.enabled</name><value>false</value></property>
</configuration>
"""


@dataclass
class Metastore:
    process: subprocess.Popen
    port: int
    log_path: Path

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _jars() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")


def start_metastore(workdir: Path) -> Metastore:
    """Start the metastore on a free port; RuntimeError with its log's end if it fails."""
    conf = workdir / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "hive-site.xml").write_text(_SITE.format(db=workdir / "metastore_db",
                                                     warehouse=workdir / "warehouse"))
    port = free_port()
    log_path = workdir / "metastore.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            ["java", "-Xmx384m", f"-Dderby.system.home={workdir}", "-cp",
             f"{conf}{os.pathsep}{_jars()}", "org.apache.hadoop.hive.metastore.HiveMetaStore",
             "-p", str(port)], cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    started = Metastore(process, port, log_path)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return started
        except OSError:
            time.sleep(0.5)
    started.stop()
    tail = log_path.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"Hive metastore did not start on port {port}:\n{tail}")
