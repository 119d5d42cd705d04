"""The requests one WebHDFS publish makes, counted at the test double (which logs each).

A small file costs the NameNode as much as a big one, so a request a publish does not need
is a cost per file (README, Performance, On HDFS). What the protocol needs of a publish:
the data staged (CREATE: the NameNode's redirect and the DataNode's PUT), the staged
file's fileId for settling a lost RENAME answer (GETFILESTATUS), the RENAME, and a parent
to rename into, made only when the RENAME says it is missing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

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
