"""HDFS faults a user meets, on a real cluster: one real ``garmexport run`` each, against the
session's broker, with the reaction the README promises (Operations, "Storage outages";
Fatal errors).

- a NameNode HA pair fails over in mid-run: the new standby answers StandbyException
  (a CREATE it still redirects, then the DataNode's PUT), the client moves on to the
  other NameNode with no store failure at all, every record exactly once (and, without an
  exporter, the first call after the failover being a CREATE);
- a space quota is reached (DSQuotaExceededException, from the DataNode's PUT: the
  NameNode's CREATE still redirects): the export pauses, readiness answers 503 (store
  unreachable), the lines say why in one line each, and it resumes when the quota is
  cleared; no empty or half-written file is published, and the empty file each refused
  write made is removed, as on a full local disk;
- the NameNode in safe mode (SafeModeException: writes refused, reads answered): paused,
  then resumed, exact;
- a DataNode killed while the exporter writes: it goes on (or retries), exact;
- the NameNode stopped for a while and started again: paused, resumed, exact;
- a root this user may not write (a directory of another user, mode 755:
  AccessControlException): ``garmexport run`` exits 2 at start-up with one line naming
  the root and the cause, no traceback.

One cluster of this module's own (an HA pair, two DataNodes, replication 2), since these
tests break it; each test restores it. The roots of the tests that are not about HA name
the first NameNode alone, as a cluster without HA is reached.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from garmexport.storage.options import defaults
from garmexport.storage.webhdfs import WebHdfsStorage
from tests.conftest import hdfs_for_fixture
from tests.hdfs.conftest import USER
from tests.hdfs_cluster import MiniHdfs
from tests.integration.harness import (
    Exporter, assert_exact, exporter_env, exporter_runs, produce, produce_in_background,
    topic_ends, wait_caught_up,
)
from tests.integration.test_cli_operator import garmexport, lines

# its own cluster, started once for the module: every test of it on one worker
pytestmark = pytest.mark.xdist_group("hdfs-faults")

RECORDS = 300
#: two event types, one day: a few files per second to publish, which a loaded machine's
#: NameNode takes about 0.1 s each (75 files of the default mix took 30 s to catch up)
STREAM = dict(partitions=2, days=1, late_share=0.0, mix={"FS_EVENT": 1, "GC_EVENT": 1})
#: the exporter's settings: files published every second, retries close together, so that
#: a fault is met within a second and its end is seen within about one more
FAST = dict(WRITER_MAX_FILE_AGE_S=1, PROTOCOL_HEARTBEAT_INTERVAL_S=1,
            STORAGE_RETRY_INITIAL_S=0.2, STORAGE_RETRY_MAX_S=1, OUTPUT_HDFS_USER=USER)


@pytest.fixture(scope="module")
def cluster() -> Iterator[MiniHdfs]:
    """Two NameNodes (the first active) and two DataNodes, replication 2: one DataNode
    down leaves every block a place to go. A restarted NameNode of an HA pair redirects a
    CREATE with the nameservice as its address; the DataNodes reach it through the
    failover proxy provider that a real HA cluster's configuration names (MiniDFSCluster
    sets it for its clients only: every CREATE after a restart was refused with
    ``UnknownHostException: minidfs-ns``)."""
    conf = {"dfs.replication": "2", "dfs.client.failover.proxy.provider.minidfs-ns":
            "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"}
    yield from hdfs_for_fixture(ha=True, conf=conf)


class Root:
    """A fresh output root on ``cluster`` (its parent owned by the test user)."""

    def __init__(self, cluster: MiniHdfs, *, ha: bool = False) -> None:
        self.cluster = cluster
        self.base = f"/t/{uuid.uuid4().hex[:12]}"
        cluster.mkdir(self.base, USER)
        self.path = f"{self.base}/out"
        self.uri = cluster.webhdfs_uri(self.path, namenode=None if ha else 0)

    def files(self) -> dict[str, int]:
        """Every file under the root and its length, read with plain WebHDFS calls from
        the active NameNode (not through the client under test)."""
        found: dict[str, int] = {}
        todo = [self.path]
        while todo:
            where = todo.pop()
            for st in _webhdfs(self.cluster, "GET", where, "LISTSTATUS")["FileStatuses"]["FileStatus"]:
                full = f"{where}/{st['pathSuffix']}"
                if st["type"] == "DIRECTORY":
                    todo.append(full)
                else:
                    found[full[len(self.path) + 1:]] = int(st["length"])
        return found


def _webhdfs(cluster: MiniHdfs, method: str, path: str, op: str) -> dict:
    """One call to whichever NameNode is active (a standby answers 403)."""
    for port in cluster.http_ports:
        res = requests.request(method, f"http://127.0.0.1:{port}/webhdfs/v1{path}",
                               params={"op": op, "user.name": USER}, timeout=10)
        if res.status_code != 403 or "StandbyException" not in res.text:
            res.raise_for_status()
            return res.json()
    raise AssertionError(f"no active NameNode answered {op} {path}")


def _start(broker, root: Root, tmp_path: Path,
           name: str) -> tuple[str, dict[str, str], Exporter]:  # noqa: ANN001
    """A topic of ``RECORDS`` records and one exporter that has caught up with it."""
    topic = broker.new_topic(partitions=STREAM["partitions"])
    env = exporter_env(broker.bootstrap, topic, root.uri, **FAST)
    produce(broker.bootstrap, topic, RECORDS, seed=3, **STREAM)
    run = Exporter(env, tmp_path, name)
    took = wait_caught_up(root.uri, topic, topic_ends(broker.bootstrap, topic), 90,
                          run.check_alive)
    print(f"{name}: started and caught up in {took:.1f} s")
    return topic, env, run


def _wait_ready(run: Exporter, status: int, timeout_s: float) -> bytes:
    """/health/ready's body once it answers ``status``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got, body = run.http_get("/health/ready")
        if got == status:
            return body
        run.check_alive()
        assert time.monotonic() < deadline, f"/health/ready stays {got}, not {status}: {body!r}"
        time.sleep(0.3)


def _finish(broker, root: Root, topic: str, env: dict[str, str], run: Exporter,
            restore: Callable[[], None] = lambda: None) -> dict:  # noqa: ANN001
    """Catch up, stop cleanly, no failure, nothing left in the temp directory, every
    record exactly once; verify's report. ``restore`` mends the cluster before the
    checks read it."""
    ends = topic_ends(broker.bootstrap, topic)
    took = wait_caught_up(root.uri, topic, ends, 90, run.check_alive)
    print(f"{run.name}: caught up {took:.1f} s after the fault's end")
    assert run.terminate() == 0, run.tail()
    restore()
    assert run.events("failure") == [], run.tail()
    files = root.files()
    left = {p: n for p, n in files.items() if p.startswith("_tmp/")}
    assert not left, f"temp files left after a clean stop: {left}"
    empty = [p for p, n in files.items() if n == 0 and not p.startswith("_")]
    assert not empty, f"empty files published: {empty}"
    started = time.monotonic()
    report = assert_exact(env, ends)
    print(f"{run.name}: verified {len(files)} files in {time.monotonic() - started:.1f} s")
    return report


def _writable(cluster: MiniHdfs, timeout_s: float = 60) -> None:
    """Wait until the active NameNode takes a file again (a restarted one is in safe mode
    until the DataNodes have reported their blocks), so the next test meets no fault."""
    deadline = time.monotonic() + timeout_s
    path = f"/t/{uuid.uuid4().hex[:12]}/probe"
    cluster.mkdir(path.rpartition("/")[0], USER)
    while True:
        for port in cluster.http_ports:
            url = f"http://127.0.0.1:{port}/webhdfs/v1{path}"
            with contextlib.suppress(requests.RequestException):
                res = requests.put(url, params={"op": "CREATE", "user.name": USER},
                                   allow_redirects=False, timeout=10)
                if res.status_code == 307:
                    put = requests.put(res.headers["location"], data=b"", timeout=10)
                    if put.status_code == 201:
                        requests.delete(url, params={"op": "DELETE", "user.name": USER},
                                        timeout=10)
                        return
        assert time.monotonic() < deadline, f"the cluster takes no file {timeout_s} s on"
        time.sleep(0.5)


def _paused_by(run: Exporter, exception: str, timeout_s: float = 30) -> dict:
    """The ``store_failing`` line of the episode, which names ``exception`` (one line: no
    Java stack trace), as the ``paused`` line does; readiness answers 503."""
    failing = run.wait_event("store_failing", timeout_s)
    assert exception in failing["reason"], failing
    assert "\tat " not in failing["reason"] and "\n" not in failing["reason"], failing
    paused = run.wait_event("paused", timeout_s)
    assert exception in paused["reason"], paused
    ready = json.loads(_wait_ready(run, 503, timeout_s))
    assert "store unreachable" in ready["reasons"], ready
    return failing


@pytest.mark.parametrize("made", [True, False], ids=["root-of-another-user", "under-another-user"])
def test_a_root_this_user_may_not_write_is_one_line_and_exit_2_at_start_up(
        cluster: MiniHdfs, tmp_path: Path, made: bool) -> None:
    """The root is a directory of user ``bob``, mode 755 (or missing, in one of his):
    readable, not writable by ``garm``."""
    base = f"/t/{uuid.uuid4().hex[:12]}"
    cluster.mkdir(base, "bob", "755")
    path = f"{base}/out"
    if made:
        cluster.mkdir(path, "bob", "755")
    uri = cluster.webhdfs_uri(path, namenode=0)
    # no broker listens: the root is checked before the exporter reaches for one
    env = exporter_env("127.0.0.1:9", "t", uri, OUTPUT_HDFS_USER=USER, LOG_FORMAT="text")
    code, err, seconds = garmexport(env, "run", timeout_s=60)
    print(f"exit {code} after {seconds:.1f} s: {err}")
    assert code == 2, err
    assert "Traceback" not in err and len(lines(err)) == 1, err
    for said in ("output.root", repr(uri), "AccessControlException",
                 "Permission denied: user=garm, access=WRITE", "output.hdfs_user"):
        assert said in err, err
    assert seconds < 30, seconds
    # nothing was made there, and nothing left behind
    listing = _webhdfs(cluster, "GET", base, "LISTSTATUS")["FileStatuses"]["FileStatus"]
    assert [s["pathSuffix"] for s in listing] == (["out"] if made else []), listing
    if made:
        assert _webhdfs(cluster, "GET", path, "LISTSTATUS")["FileStatuses"]["FileStatus"] == []


def test_the_first_write_after_a_failover_goes_to_the_new_active_namenode(
        cluster: MiniHdfs) -> None:
    """The new standby still redirects a CREATE (its DataNode's PUT is what it refuses):
    the client must move on from that answer too, or it would ask the standby for ever."""
    root = Root(cluster, ha=True)
    storage = WebHdfsStorage([f"http://127.0.0.1:{p}" for p in cluster.http_ports], root.path,
                             "probe", uri=root.uri, options=dataclasses.replace(
                                 defaults().webhdfs, user=USER, timeout_s=10))
    try:
        assert storage.root_state() == "missing"  # asked of the first NameNode, active
        cluster.command("failover 0 1")
        try:
            storage.put_exclusive("d/f", b"after the failover")  # a CREATE first
            assert storage.read("d/f") == b"after the failover"
        finally:
            cluster.command("failover 1 0")
            _writable(cluster)
    finally:
        storage.close()


def test_a_failover_in_mid_run_is_followed_without_a_store_failure(
        broker, cluster: MiniHdfs, tmp_path: Path) -> None:
    root = Root(cluster, ha=True)
    topic, env, run = _start(broker, root, tmp_path, "failover")
    with exporter_runs() as runs:
        runs.append(run)
        thread, _ = produce_in_background(broker.bootstrap, topic, 600, seed=4, rate=300,
                                          **STREAM)
        time.sleep(1.0)  # the stream is being written
        cluster.command("failover 0 1")
        try:
            thread.join(60)
            _finish(broker, root, topic, env, run)
        finally:
            cluster.command("failover 1 0")
            _writable(cluster)
        # the standby's answers were taken in stride: no episode, no pause
        assert run.events("store_failing") == [] and run.events("paused") == [], run.tail()


def test_a_space_quota_reached_pauses_the_export_until_it_is_raised(
        broker, cluster: MiniHdfs, tmp_path: Path) -> None:
    root = Root(cluster)
    topic, env, run = _start(broker, root, tmp_path, "quota")
    with exporter_runs() as runs:
        runs.append(run)
        # a new block needs its size times the replication free in the quota (256 MB
        # here): a quota of 1 MB refuses every new file that holds a byte
        cluster.command(f"quota {root.base} {1 << 20}")
        try:
            produce(broker.bootstrap, topic, 300, seed=5, **STREAM)
            _paused_by(run, "DSQuotaExceededException")
            time.sleep(1)  # a few refused attempts, each leaving an empty file to remove
            assert run.events("resumed") == [], run.tail()
        finally:
            cluster.command(f"quota {root.base} -1")
        run.wait_event("resumed", timeout_s=30)
        _wait_ready(run, 200, 30)
        _finish(broker, root, topic, env, run)


def test_safe_mode_pauses_the_export_and_leaving_it_resumes(
        broker, cluster: MiniHdfs, tmp_path: Path) -> None:
    root = Root(cluster)
    topic, env, run = _start(broker, root, tmp_path, "safemode")
    with exporter_runs() as runs:
        runs.append(run)
        cluster.command("safemode enter")
        try:
            produce(broker.bootstrap, topic, 300, seed=6, **STREAM)
            _paused_by(run, "SafeModeException")
            assert root.files()  # reads are answered
            time.sleep(1)
            assert run.events("resumed") == [], run.tail()
        finally:
            cluster.command("safemode leave")
        run.wait_event("resumed", timeout_s=30)
        _wait_ready(run, 200, 30)
        _finish(broker, root, topic, env, run)


def test_a_datanode_killed_while_the_export_writes_is_written_around(
        broker, cluster: MiniHdfs, tmp_path: Path) -> None:
    root = Root(cluster)
    topic, env, run = _start(broker, root, tmp_path, "datanode")
    restored = False

    def restore() -> None:
        """Before verify reads: a read the NameNode sends to the dead DataNode (it has
        not noticed the death yet) is refused (see the README)."""
        nonlocal restored
        cluster.command("start-datanode 0")
        restored = True

    with exporter_runs() as runs:
        runs.append(run)
        thread, _ = produce_in_background(broker.bootstrap, topic, 900, seed=7, rate=300,
                                          **STREAM)
        time.sleep(1.0)
        cluster.command("stop-datanode 0")
        killed = time.monotonic()
        try:
            thread.join(60)
            _finish(broker, root, topic, env, run, restore)
            print(f"caught up {time.monotonic() - killed:.1f} s after the kill")
        finally:
            if not restored:
                cluster.command("start-datanode 0")
            _writable(cluster)


def test_a_namenode_down_for_a_while_pauses_the_export_and_its_return_resumes(
        broker, cluster: MiniHdfs, tmp_path: Path) -> None:
    root = Root(cluster)
    topic, env, run = _start(broker, root, tmp_path, "namenode")
    with exporter_runs() as runs:
        runs.append(run)
        cluster.command("stop-namenode 0")
        try:
            produce(broker.bootstrap, topic, 300, seed=8, **STREAM)
            _paused_by(run, "Connection refused")
        finally:
            started = time.monotonic()
            cluster.command("start-namenode 0")
            print(f"the NameNode took {time.monotonic() - started:.1f} s to start again")
        run.wait_event("resumed", timeout_s=60)
        _wait_ready(run, 200, 30)
        _finish(broker, root, topic, env, run)
        _writable(cluster)
