"""The requests one WebHDFS publish makes, counted at the test double (which logs each).

A small file costs the NameNode as much as a big one, so a request a publish does not need
is a cost per file (docs/performance.md, On HDFS). What the protocol needs of a publish:
the data staged (CREATE: the NameNode's redirect and the DataNode's PUT), the staged
file's fileId for settling a lost RENAME answer (GETFILESTATUS), the RENAME, and a parent
to rename into, made only when the RENAME says it is missing. An empty file (an intent)
needs none of it but the CREATE, of its own name: nothing in it can be seen torn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from garmexport.errors import PublishConflict
from garmexport.storage.options import defaults
from garmexport.storage.webhdfs import WebHdfsStorage
from tests.webhdfs_server import WebHdfsServer

DAY = "fs/day=2026-11-01"
STAGE = ["CREATE", "CREATE", "GETFILESTATUS"]  # the redirect, the data, the fileId


@pytest.fixture
def storage(webhdfs_server: WebHdfsServer) -> Iterator[WebHdfsStorage]:
    options = dataclasses.replace(defaults().webhdfs, user="garm", timeout_s=10)
    s = WebHdfsStorage([webhdfs_server.url], "/out", "inst-a", uri="webhdfs://test/out",
                       options=options)
    yield s
    s.close()


def asked(server: WebHdfsServer, since: int) -> list[str]:
    return [op for _, op, _ in server.faults.requests[since:]]


def test_a_publish_into_an_existing_directory_makes_no_directory(
        webhdfs_server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    storage.put_exclusive(f"{DAY}/a.parquet", b"first")
    before = len(webhdfs_server.faults.requests)
    storage.put_exclusive(f"{DAY}/b.parquet", b"second")
    assert asked(webhdfs_server, before) == STAGE + ["RENAME"]
    assert storage.read(f"{DAY}/b.parquet") == b"second"


def test_the_first_file_of_a_directory_makes_it_after_the_rename_says_it_is_missing(
        webhdfs_server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    before = len(webhdfs_server.faults.requests)
    storage.put_exclusive(f"{DAY}/a.parquet", b"first")
    assert asked(webhdfs_server, before) == STAGE + ["RENAME", "MKDIRS", "RENAME"]
    assert storage.read(f"{DAY}/a.parquet") == b"first"


def test_a_taken_name_is_a_conflict_after_one_more_rename(
        webhdfs_server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    storage.put_exclusive(f"{DAY}/a.parquet", b"theirs")
    staged = storage.stage(b"ours")
    before = len(webhdfs_server.faults.requests)
    with pytest.raises(PublishConflict):
        storage.publish(staged, f"{DAY}/a.parquet")
    # false twice (the parent made between: it might have been missing), then the settle
    assert asked(webhdfs_server, before) == ["RENAME", "MKDIRS", "RENAME",
                                             "GETFILESTATUS", "GETFILESTATUS"]
    assert storage.read(f"{DAY}/a.parquet") == b"theirs"


INTENT = "_offsets/local+t/00000/i+fs+d+2026-11-01+00000000000000000042"


def test_an_empty_file_is_created_in_place_in_one_create(
        webhdfs_server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    before = len(webhdfs_server.faults.requests)
    storage.put_exclusive(INTENT, b"")  # its directories are missing too: CREATE makes them
    assert asked(webhdfs_server, before) == ["CREATE", "CREATE"]  # no stage, no RENAME
    assert storage.read(INTENT) == b""
    assert storage.list("_tmp/inst-a") == []
    before = len(webhdfs_server.faults.requests)
    with pytest.raises(PublishConflict):
        storage.put_exclusive(INTENT, b"")
    assert asked(webhdfs_server, before) == ["CREATE", "CREATE"]


def test_an_empty_file_whose_create_went_unanswered_is_settled_from_the_namespace(
        webhdfs_server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    """The DataNode made the file and its answer was lost: the repeat finds the name
    taken, by an empty file, which is exactly these bytes: done, not a conflict."""
    real = storage._client._request
    lost: list[str] = []

    def lose_the_first_datanode_answer(*args: Any, **kwargs: Any) -> requests.Response:
        res = real(*args, **kwargs)
        url = kwargs.get("url", args[1] if len(args) > 1 else "")
        if "datanode=true" in url and not lost:
            lost.append(url)
            raise requests.ConnectionError("the answer was lost")
        return res

    storage._client._request = lose_the_first_datanode_answer
    before = len(webhdfs_server.faults.requests)
    storage.put_exclusive(INTENT, b"")
    assert lost
    assert asked(webhdfs_server, before) == ["CREATE", "CREATE", "CREATE", "CREATE",
                                             "GETFILESTATUS"]
    assert storage.read(INTENT) == b""
    with pytest.raises(PublishConflict):  # a later put of the name, answered: a conflict
        storage.put_exclusive(INTENT, b"")


def test_an_unanswered_empty_create_that_finds_another_file_is_a_conflict(
        webhdfs_server: WebHdfsServer, storage: WebHdfsStorage) -> None:
    storage.put_exclusive(INTENT, b"")
    storage.delete(INTENT)
    storage.put_exclusive(INTENT, b"not empty")  # another writer's file at the name
    webhdfs_server.faults.drop_next(1, op="CREATE")  # the first redirect goes unanswered
    with pytest.raises(PublishConflict):
        storage.put_exclusive(INTENT, b"")
    assert storage.read(INTENT) == b"not empty"
