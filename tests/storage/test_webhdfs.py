"""WebHDFS backend under faults, HA and protocol details (against the test double).

The double gives the answers a real cluster was seen to give (tests/hdfs/test_hdfs_faults.py
meets the same faults on Hadoop's own NameNode and DataNodes): a standby that still
redirects a CREATE, safe mode, a space quota, a directory of another user. What a real
cluster cannot be made to do on demand stays here alone: 503s, connections dropped before
or after the work (lost answers), a NameNode that is not listening.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hdfs import InsecureClient

from garmexport.errors import ConfigError, PublishConflict, StorageDenied, StorageError
from garmexport.storage.options import defaults
from garmexport.storage.root_check import prepare_for_run
from garmexport.storage.webhdfs import WebHdfsStorage
from tests.webhdfs_server import WebHdfsServer

PATH = "fs/day=2026-11-01/local+t+00000+00000000000000000042.parquet"


def make(urls: list[str], sleeps: list[float] | None = None, attempts: int = 4) -> WebHdfsStorage:
    record = sleeps if sleeps is not None else []
    options = dataclasses.replace(defaults().webhdfs, user="garm", attempts=attempts,
                                  timeout_s=10)
    return WebHdfsStorage(urls, "/out", "inst-a", uri="webhdfs://test/out", options=options,
                          sleep=record.append)


@pytest.fixture
def server(webhdfs_server: WebHdfsServer) -> WebHdfsServer:
    return webhdfs_server


@pytest.fixture
def storage(server: WebHdfsServer) -> Iterator[WebHdfsStorage]:
    s = make([server.url])
    yield s
    s.close()


def ops(server: WebHdfsServer, op: str) -> int:
    return sum(1 for _, o, _ in server.faults.requests if o == op)


def test_transient_503s_on_reads_are_retried_with_back_off(server: WebHdfsServer) -> None:
    sleeps: list[float] = []
    storage = make([server.url], sleeps)
    storage.put_exclusive("d/f", b"x")
    server.faults.fail_next(2, op="LISTSTATUS")
    assert [e.name for e in storage.list("d")] == ["f"]
    assert ops(server, "LISTSTATUS") == 3
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] / 2  # exponential, jittered
    storage.close()


def test_dropped_connections_on_stage_are_retried_under_a_new_name(
        server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    server.faults.drop_next(1, op="CREATE")
    server.faults.fail_next(1, op="CREATE")
    staged = storage.stage(b"payload")
    storage.publish(staged, PATH)
    assert storage.read(PATH) == b"payload"


def test_exhausted_retries_raise_storage_error(server: WebHdfsServer) -> None:
    storage = make([server.url], attempts=3)
    server.faults.fail_next(3, op="GETFILESTATUS")
    with pytest.raises(StorageError):
        storage.exists("d/f")
    assert ops(server, "GETFILESTATUS") == 3
    storage.close()


def test_rename_done_but_unanswered_is_settled_as_published(
        server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    storage.put_exclusive(PATH + ".before", b"")  # the directory exists: the RENAME does it
    staged = storage.stage(b"mine")
    renames = ops(server, "RENAME")
    server.faults.drop_next(1, op="RENAME", after=True)
    storage.publish(staged, PATH)
    assert storage.read(PATH) == b"mine"
    assert ops(server, "RENAME") == renames + 1  # never sent twice


def test_rename_lost_before_reaching_the_server_keeps_the_staged_file(
        server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    staged = storage.stage(b"mine")
    server.faults.drop_next(1, op="RENAME")
    with pytest.raises(StorageError) as info:
        storage.publish(staged, PATH)
    assert not isinstance(info.value, PublishConflict)
    assert not storage.exists(PATH)
    storage.publish(staged, PATH)  # the caller's retry succeeds
    assert storage.read(PATH) == b"mine"


def test_unanswered_rename_that_lost_to_another_owner_is_a_conflict(
        server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    ours = storage.stage(b"ours")
    storage.put_exclusive(PATH, b"theirs")
    server.faults.fail_next(1, op="RENAME")
    with pytest.raises(PublishConflict):
        storage.publish(ours, PATH)
    assert storage.read(PATH) == b"theirs"


def test_a_standby_namenode_is_skipped(tmp_path) -> None:
    """A standby redirects a CREATE as the active one does; the DataNode's PUT is refused
    with StandbyException, and the next CREATE goes to the other NameNode, and stays."""
    standby, active = WebHdfsServer(str(tmp_path)).start(), WebHdfsServer(str(tmp_path)).start()
    standby.faults.standby = True
    storage = make([standby.url, active.url])
    try:
        storage.put_exclusive(PATH, b"ha")
        assert storage.read(PATH) == b"ha"
        assert ops(standby, "CREATE") == 2  # redirected, then refused at its "DataNode"
        storage.put_exclusive(PATH + ".2", b"ha")
        assert ops(standby, "CREATE") == 2
    finally:
        storage.close()
        standby.stop()
        active.stop()


def test_an_unreachable_namenode_is_skipped(server: WebHdfsServer) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        storage = make([dead, server.url])
        storage.put_exclusive(PATH, b"ha")
        assert storage.read(PATH) == b"ha"
        storage.close()


def test_all_namenodes_in_standby_is_a_storage_error(server: WebHdfsServer) -> None:
    server.faults.standby = True
    storage = make([server.url], attempts=2)
    with pytest.raises(StorageError):
        storage.list("")
    storage.close()


def test_remote_exceptions_become_storage_errors(storage: WebHdfsStorage) -> None:
    storage.put_exclusive("blocker", b"a file where a directory should be")
    staged = storage.stage(b"x")
    with pytest.raises(StorageError, match="ParentNotDirectory"):
        storage.publish(staged, "blocker/child")


def test_the_double_accepts_chunked_uploads_and_appends(server: WebHdfsServer) -> None:
    client = InsecureClient(server.url, user="garm")
    client.write("/c/file", data=(part for part in [b"ab", b"cd", b"ef"]))  # chunked
    client.write("/c/file", data=b"gh", append=True)
    with client.read("/c/file", offset=2, length=3) as reader:
        assert reader.read() == b"cde"
    assert client.status("/c/file")["length"] == 8
    client._session.close()


def test_the_double_never_lets_rename_overwrite(server: WebHdfsServer) -> None:
    client = InsecureClient(server.url, user="garm")
    client.write("/a", data=b"a")
    client.write("/b", data=b"b")
    assert client._rename("/a", destination="/b").json() == {"boolean": False}
    assert client._rename("/missing", destination="/c").json() == {"boolean": False}
    with client.read("/b") as reader:
        assert reader.read() == b"b"
    client._session.close()


def test_a_footer_read_with_the_listed_size_asks_no_file_status(
        server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from garmexport.storage.footer import read_footer

    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"kafka_offset": [1, 2, 3]}), sink)
    storage.put_exclusive(PATH, sink.getvalue().to_pybytes())
    [entry] = storage.list(PATH.rpartition("/")[0])
    before = len(server.faults.requests)
    assert read_footer(storage, PATH, entry.size).num_rows == 3
    asked = [o for _, o, _ in server.faults.requests[before:]]
    assert asked == ["OPEN", "OPEN"]  # the NameNode's, then its DataNode redirect
    before = len(server.faults.requests)
    assert read_footer(storage, PATH).num_rows == 3
    assert len(server.faults.requests) - before == 3  # without the size: a status first


def test_safe_mode_refuses_changes_once_and_answers_reads(
        server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    storage.put_exclusive(PATH, b"before")
    server.faults.safe_mode = True
    before = len(server.faults.requests)
    with pytest.raises(StorageError, match="SafeModeException: Cannot create") as info:
        storage.stage(b"x")
    assert "\tat " not in str(info.value) and "\n" not in str(info.value), info.value
    # an answer, not a blip: not retried here (the exporter's back-off paces the retries);
    # one DELETE, refused too, for the file safe mode may have caught half made
    asked = [o for _, o, _ in server.faults.requests[before:]]
    assert asked == ["CREATE", "CREATE", "DELETE"], asked
    assert storage.read(PATH) == b"before" and storage.exists(PATH)
    server.faults.safe_mode = False
    storage.put_exclusive(PATH + ".2", b"after")


def test_a_space_quota_refusal_leaves_no_temp_file(
        server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    """The DataNode makes the file, empty, before its block is refused: it is removed."""
    server.faults.quota_exceeded = True
    with pytest.raises(StorageError, match="DSQuotaExceededException: The DiskSpace quota") as info:
        storage.stage(b"x" * 1000)
    assert "\tat " not in str(info.value), info.value
    assert storage.list("_tmp/inst-a") == []
    server.faults.quota_exceeded = False
    storage.put_exclusive(PATH, b"after")
    assert storage.list("_tmp/inst-a") == []


def test_a_cleanup_delete_on_a_dropped_connection_is_sent_once_more(
        server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    """The cleanup DELETE of a refused stage meets a connection closed without an answer (a
    pooled connection the server had closed): it goes again at once, and the temp is gone.
    Dropped twice, the stage's own error is still the one raised, and the temp stays for
    ``gc_temp``: the cleanup is not a retry loop."""
    server.faults.quota_exceeded = True
    server.faults.drop_next(1, "DELETE")
    with pytest.raises(StorageError, match="DSQuotaExceededException"):
        storage.stage(b"x" * 1000)
    assert storage.list("_tmp/inst-a") == []
    server.faults.drop_next(2, "DELETE")
    with pytest.raises(StorageError, match="DSQuotaExceededException"):
        storage.stage(b"x" * 1000)
    assert len(storage.list("_tmp/inst-a")) == 1
    assert not server.faults.drop  # both drops were met: two attempts, not more


def test_a_directory_of_another_user_is_denied(server: WebHdfsServer,
                                                storage: WebHdfsStorage) -> None:
    server.faults.denied.append("/out")
    with pytest.raises(StorageDenied, match="AccessControlException: Permission denied: "
                       "user=garm, access=WRITE"):
        storage.stage(b"x")
    with pytest.raises(StorageDenied):
        storage.create_root()
    assert storage.list("") == []  # reading is allowed


@pytest.mark.parametrize("made", [True, False])
def test_run_refuses_a_root_this_user_may_not_write_as_a_configuration_error(
        server: WebHdfsServer, made: bool) -> None:
    """The root of another user (or missing, in a directory of his): ConfigError naming
    the root, the refusal and what to do, and nothing made there."""
    if made:
        (Path(server.data_dir) / "theirs" / "out").mkdir(parents=True)
    server.faults.denied.append("/theirs")
    root = f"webhdfs://127.0.0.1:{server.server_address[1]}/theirs/out"
    options = dataclasses.replace(defaults(), webhdfs=dataclasses.replace(
        defaults().webhdfs, user="garm", timeout_s=10))
    with pytest.raises(ConfigError) as info:
        prepare_for_run(root, "inst-a", options)
    said = str(info.value)
    for part in (f"output.root (GARMEXPORT_OUTPUT_ROOT) = {root!r}: this user may not write it",
                 "AccessControlException: Permission denied: user=garm, access=WRITE",
                 "output.hdfs_user"):
        assert part in said, said
    assert [p.name for p in (Path(server.data_dir) / "theirs").rglob("*")] == (
        ["out"] if made else [])
