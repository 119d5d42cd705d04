"""``garmexport compact`` on the secure HA cluster, through an HA nameservice, with Kerberos.

The secure cluster and its KDC are tests/hdfs/test_hdfs_kerberos.py's (its module fixture,
imported): two NameNodes and DataNodes logged in to a real MIT KDC. A day of exporter-like
files (tests/spark/exporter_like.py) is published through the exporter's WebHDFS backend
with SPNEGO, as principal ``short`` from its keytab (tickets of 5 s, not renewable), into
a root of mode 755 that ``short`` owns; then ``garmexport compact`` runs as a real process
with nothing but what an operator gives it:

- ``[output]`` as the exporter's (``hdfs_kerberos``, the principal and its keytab), a
  ``webhdfs://`` root naming both NameNodes, and ``compaction.hadoop_root =
  hdfs://<nameservice>/<path>``;
- ``HADOOP_CONF_DIR`` holding a cluster's client configuration: ``core-site.xml`` with
  ``hadoop.security.authentication = kerberos``, ``hdfs-site.xml`` with the nameservice over
  both NameNodes' RPC addresses, its failover proxy provider and
  ``dfs.namenode.kerberos.principal``;
- ``KRB5_CONFIG`` naming the realm's krb5.conf (what MIT's tools read) and a default
  ticket cache that holds no ticket, so that nothing but the keytab can log Spark in.

The NameNodes are failed over before ``compact`` starts: the first NameNode of the
nameservice is standby, so Spark's client finds the active one through the nameservice.
Hive is off (``--no-hive``): the standalone metastore would need a Kerberos login of its
own to look at ``hdfs://`` locations, which tests/hdfs/test_hdfs_compaction.py covers
without Kerberos.

The one Spark run lasts several ticket lifetimes: Spark's client must log in again from
the keytab as they end (Hadoop's client does so when a connection cannot authenticate, at
most once a minute unless ``hadoop.kerberos.min.seconds.before.relogin`` says otherwise:
the test's core-site.xml sets 1 s, for tickets of 5 s).

What the module found (garmexport/compaction/hadoop_conf.py now does it): Spark's Hadoop
client logs in from Kerberos only when told to (``spark.kerberos.principal`` and
``spark.kerberos.keytab``: Spark 4's SparkSubmit logs in from them in local mode too), and
its JVM finds the KDC only through ``-Djava.security.krb5.conf``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
import requests

from garmexport.compaction.names import CompactedName
from tests.hdfs.secure_gate import skip_unless_secure

skip_unless_secure()  # before the names of skipping modules (secure_gate says why)
from tests.hdfs.test_hdfs_compaction import OUTPUT, day_files, publish_day, rows_of
from tests.hdfs.test_hdfs_kerberos import (  # noqa: F401 - secure_hdfs: the fixture
    SHORT_LIFE_S, Secure, kerberized, secure_hdfs,
)
from tests.kdc import REALM
from tests.spark.test_compaction import DAY

# the secure cluster's module: its tests on one pytest-xdist worker
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("hdfs-kerberos-compaction")]

REPO = Path(__file__).resolve().parents[2]
USER = "short"  # the exporter's principal: tickets of SHORT_LIFE_S seconds, from its keytab
NAMESERVICE = "garm-ha"  # the operator's name for the pair, not MiniDFSCluster's own
FAILOVER_PROVIDER = "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"


def site_xml(path: Path, settings: dict[str, str]) -> None:
    props = "".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value>"
                    "</property>\n" for k, v in settings.items())
    path.write_text(f'<?xml version="1.0"?>\n<configuration>\n{props}</configuration>\n')


def operator_conf(directory: Path, secure: Secure) -> Path:
    """A HADOOP_CONF_DIR as a secure HA cluster's clients get it: Kerberos, and the
    nameservice over both NameNodes' RPC addresses."""
    directory.mkdir()
    site_xml(directory / "core-site.xml", {
        "hadoop.security.authentication": "kerberos",
        # the test's own: tickets of SHORT_LIFE_S end during the run, and Hadoop's client
        # logs in again from the keytab at most once a minute by default (60 s), longer
        # than they live (a cluster's tickets live hours); connections idle for half a
        # second are closed, so that new ones need a valid ticket throughout the run
        "hadoop.kerberos.min.seconds.before.relogin": "1",
        "ipc.client.connection.maxidletime": "500"})
    ids = [f"nn{i + 1}" for i in range(len(secure.cluster.namenodes))]
    hdfs = {"dfs.nameservices": NAMESERVICE, f"dfs.ha.namenodes.{NAMESERVICE}": ",".join(ids),
            f"dfs.client.failover.proxy.provider.{NAMESERVICE}": FAILOVER_PROVIDER,
            "dfs.namenode.kerberos.principal": f"hdfs/localhost@{REALM}",
            # the NameNodes in the order given (Hadoop 3.5's default is a random order):
            # nn1 first, which the test makes standby, so the client must fail over
            f"dfs.client.failover.random.order.{NAMESERVICE}": "false"}
    for nn_id, nn in zip(ids, secure.cluster.namenodes):
        hdfs[f"dfs.namenode.rpc-address.{NAMESERVICE}.{nn_id}"] = f"127.0.0.1:{nn['rpc']}"
    site_xml(directory / "hdfs-site.xml", hdfs)
    return directory


@dataclass
class Day:
    """A published day on the secure cluster and how ``compact`` is pointed at it."""

    root: str  # webhdfs:// naming both NameNodes
    path: str  # the root's path on the cluster
    rows: list[tuple[str, int, int]]
    env: dict[str, str]  # compact's environment, as an operator's job gives it
    workdir: Path


@pytest.fixture(scope="module")
def published(secure_hdfs: Secure, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
              ) -> Iterator[Day]:
    workdir = tmp_path_factory.mktemp("compact")
    root = secure_hdfs.root(owner=USER)  # /t/<id>/out in a directory of mode 755, USER's
    path = "/" + root.split("://", 1)[1].partition("/")[2]
    store = kerberized(secure_hdfs, root, USER)
    try:
        rows = publish_day(store)
        assert rows_of(store) == sorted(rows) and len(day_files(store)) == 30
    finally:
        store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GARMEXPORT_")}
    env.update(
        PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1", GARMEXPORT_LOG_FORMAT="text",
        HADOOP_CONF_DIR=str(operator_conf(workdir / "hadoop-conf", secure_hdfs)),
        KRB5_CONFIG=str(secure_hdfs.kdc.krb5_conf),
        KRB5CCNAME=f"FILE:{workdir / 'no-ticket-here'}",  # only the keytab can log in
        GARMEXPORT_OUTPUT_ROOT=root,
        GARMEXPORT_OUTPUT_HDFS_KERBEROS="true",
        GARMEXPORT_OUTPUT_HDFS_KERBEROS_PRINCIPAL=secure_hdfs.principal(USER),
        GARMEXPORT_OUTPUT_HDFS_KERBEROS_KEYTAB=str(secure_hdfs.keytabs[USER]),
        GARMEXPORT_COMPACTION_HADOOP_ROOT=f"hdfs://{NAMESERVICE}{path}",
        GARMEXPORT_COMPACTION_LATENESS_S="3600",  # the test's day ended long ago
        GARMEXPORT_COMPACTION_RETIRED_GRACE_S="0",
        GARMEXPORT_COMPACTION_SPARK_MASTER="local[2]")
    yield Day(root, path, rows, env, workdir)


def compact(day: Day, *args: str, timeout_s: float = 300, **changed: str
            ) -> tuple[subprocess.CompletedProcess[str], float]:
    """``garmexport compact --no-hive ARGS`` as a process, its environment ``changed``;
    its result and its seconds."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "garmexport", "compact", "--no-hive", *args],
                          env={**day.env, **changed}, cwd=day.workdir, capture_output=True,
                          text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    return done, time.monotonic() - started


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if " INFO " not in line]


def test_a_keytab_without_the_principals_key_is_one_error_and_exit_2_before_spark(
        secure_hdfs: Secure, published: Day) -> None:  # noqa: F811
    """``spark``'s keytab given for USER: kinit's refusal, one line, in seconds; no JVM
    starts (before, Spark's login was a stack trace) and the day is as it was."""
    before = day_files_of(secure_hdfs, published)
    done, seconds = compact(published, GARMEXPORT_OUTPUT_HDFS_KERBEROS_KEYTAB=str(
        secure_hdfs.keytabs["spark"]))
    print(f"exit {done.returncode} after {seconds:.1f} s: {done.stderr}")
    assert done.returncode == 2, done.stderr[-3000:]
    [line] = error_lines(done)
    for said in ("configuration error", f"{USER}@GARMEXPORT.TEST", "spark.keytab",
                 "no suitable keys"):
        assert said in line, line
    assert "Traceback" not in done.stderr and "spark_log" not in done.stderr
    assert seconds < 30, seconds
    assert day_files_of(secure_hdfs, published) == before  # the 30 raw files


def test_a_krb5_conf_naming_a_kdc_that_does_not_answer_is_one_error_and_exit_2(
        secure_hdfs: Secure, published: Day, tmp_path: Path) -> None:  # noqa: F811
    """KRB5_CONFIG (read by MIT's kinit, and passed to Spark's JVM as
    java.security.krb5.conf) naming a port nobody listens on: one line naming the realm."""
    wrong = tmp_path / "krb5.conf"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # free once the socket is closed
    wrong.write_text(secure_hdfs.kdc.krb5_conf.read_text().replace(
        f"127.0.0.1:{secure_hdfs.kdc.port}", f"127.0.0.1:{closed}"))
    done, seconds = compact(published, KRB5_CONFIG=str(wrong))
    print(f"exit {done.returncode} after {seconds:.1f} s: {done.stderr}")
    assert done.returncode == 2, done.stderr[-3000:]
    [line] = error_lines(done)
    assert "Cannot contact any KDC for realm 'GARMEXPORT.TEST'" in line, line
    assert "Traceback" not in done.stderr and seconds < 30, (seconds, done.stderr[-3000:])


def day_files_of(secure: Secure, day: Day) -> list[str]:
    store = kerberized(secure, day.root)
    try:
        return day_files(store)
    finally:
        store.close()


def rpc_tgts(secure: Secure, principal: str, since_s: float) -> set[int]:
    """Authtimes of the TGTs ``principal`` got NameNode (``hdfs/``) service tickets with
    since ``since_s`` (the KDC's log): one per Kerberos login of Spark's client."""
    found = re.findall(rf"TGS_REQ .*ISSUE: authtime (\d+),.* {re.escape(principal)} for hdfs/",
                       (secure.kdc.root / "kdc.log").read_text())
    return {int(t) for t in found if int(t) >= since_s - 1}


def test_a_day_is_compacted_exactly_once_through_the_nameservice_after_a_failover(
        secure_hdfs: Secure, published: Day) -> None:  # noqa: F811
    """Spark logs in as the exporter's principal from its keytab (the default cache holds
    no ticket), finds the active NameNode through the nameservice whose first NameNode is
    standby, writes as USER into USER's root of mode 755, and logs in again from the
    keytab as its tickets of SHORT_LIFE_S end during the run."""
    assert secure_hdfs.cluster.command("failover 0 1")["active"] == 1  # nn1 is standby
    try:
        started = time.time()
        # INFO: the JVM's own lines say whom Spark logged in as, and from what
        done, seconds = compact(published, "--spark-log-level", "INFO")
        print(f"compact: exit {done.returncode} in {seconds:.1f} s")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
        assert re.search(r"jvm_logger=org\.apache\.hadoop\.security\.UserGroupInformation "
                         rf'message="Login successful for user {USER}@GARMEXPORT\.TEST using '
                         rf"keytab file {USER}\.keytab", done.stderr), done.stderr[-6000:]
        # Spark's RPC went on with a TGT got after its first one ended: a login again
        logins = rpc_tgts(secure_hdfs, secure_hdfs.principal(USER), started)
        print(f"Spark's client used {len(logins)} TGTs in {seconds:.1f} s")
        assert len(logins) >= 2 and seconds > 2 * SHORT_LIFE_S, (logins, seconds)
        store = kerberized(secure_hdfs, published.root, USER)
        try:
            names = day_files(store)
            assert names and all(CompactedName.parse(n) for n in names), names
            assert len(names) < 30
            assert rows_of(store) == sorted(published.rows)  # every (partition, offset) once
            assert store.list(f"_compaction/{OUTPUT}/day={DAY}") == []
            # Spark's files are USER's: the principal it logged in as
            session: requests.Session = store._client._session  # type: ignore[attr-defined]
            nn = (f"http://127.0.0.1:{secure_hdfs.cluster.http_ports[1]}/webhdfs/v1"
                  f"{published.path}/{OUTPUT}/day={DAY}")
            listed = session.get(nn, params={"op": "LISTSTATUS"}, timeout=30).json()
            owners = {s["pathSuffix"]: s["owner"] for s in listed["FileStatuses"]["FileStatus"]}
            assert owners and set(owners.values()) == {USER}, owners
        finally:
            store.close()
    finally:
        secure_hdfs.cluster.command("failover 1 0")
