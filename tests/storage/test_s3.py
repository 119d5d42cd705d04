"""S3 backend details against a real SeaweedFS server."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator

import pytest

from garmexport.compaction.store_fs import StoreFs
from garmexport.errors import ConfigError, PublishConflict, StorageError
from garmexport.storage.base import ROOT_MISSING
from garmexport.storage.options import defaults
from garmexport.storage.s3 import STAGE_TAG, S3Storage
from tests.seaweed import Seaweed

PATH = "fs/day=2026-11-01/local+t+00000+00000000000000000042.parquet"


def s3(bucket: str, prefix: str, instance: str, endpoint_url: str, access_key: str,
       secret_key: str, **more: object) -> S3Storage:
    options = dataclasses.replace(defaults().s3, endpoint_url=endpoint_url,
                                  access_key_id=access_key, secret_access_key=secret_key, **more)
    return S3Storage(bucket, prefix, instance, options=options)


@pytest.fixture
def storage(seaweed: Seaweed) -> Iterator[S3Storage]:
    s = s3(seaweed.bucket, uuid.uuid4().hex, "inst-a", seaweed.endpoint, seaweed.access_key,
           seaweed.secret_key)
    yield s
    s.close()


def test_the_store_refuses_a_second_conditional_put(storage: S3Storage) -> None:
    """The fence rests on this: If-None-Match: * is honoured (412), not ignored."""
    key = f"{storage.prefix}/probe"
    storage._client.put_object(Bucket=storage.bucket, Key=key, Body=b"1", IfNoneMatch="*")
    with pytest.raises(storage._client.exceptions.ClientError) as info:
        storage._client.put_object(Bucket=storage.bucket, Key=key, Body=b"2", IfNoneMatch="*")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert storage.read("probe") == b"1"


def test_a_repeated_put_of_our_own_object_is_settled_as_published(storage: S3Storage) -> None:
    staged = storage.stage(b"mine")
    # As if our PUT landed but its answer was lost: the object carries our stage tag.
    storage._client.put_object(Bucket=storage.bucket, Key=f"{storage.prefix}/{PATH}",
                               Body=b"mine", Metadata={STAGE_TAG: staged.handle})
    storage.publish(staged, PATH)
    assert storage.read(PATH) == b"mine"


def test_another_owners_object_is_a_conflict(storage: S3Storage) -> None:
    storage.put_exclusive(PATH, b"theirs")
    staged = storage.stage(b"ours")
    with pytest.raises(PublishConflict):
        storage.publish(staged, PATH)
    assert storage.read(PATH) == b"theirs"


def test_a_handle_from_another_storage_object_is_refused(storage: S3Storage,
                                                         seaweed: Seaweed) -> None:
    other = s3(seaweed.bucket, storage.prefix, "inst-b", seaweed.endpoint, seaweed.access_key,
               seaweed.secret_key)
    staged = other.stage(b"x")
    with pytest.raises(StorageError, match="unknown staged handle"):
        storage.publish(staged, PATH)
    other.close()


def test_an_unreachable_store_is_a_storage_error() -> None:
    storage = s3("b", "p", "inst-a", "http://127.0.0.1:9", "k", "s", attempts=1, timeout_s=2)
    with pytest.raises(StorageError):
        storage.list("")
    with pytest.raises(StorageError):
        storage.publish(storage.stage(b"x"), PATH)  # unanswered, then unsettled
    storage.close()


def test_credentials_never_show_in_repr(seaweed: Seaweed) -> None:
    storage = s3(seaweed.bucket, "p", "inst-a", seaweed.endpoint, seaweed.access_key,
                 seaweed.secret_key)
    assert seaweed.secret_key not in repr(storage) and seaweed.access_key not in repr(storage)
    storage.close()



def test_a_file_is_published_without_waiting_for_a_read_timeout(seaweed: Seaweed) -> None:
    """SeaweedFS answers "Expect: 100-continue" in a way urllib3 cannot parse: a PUT that
    asked for it after an empty one (an intent) hung until the read timeout (60 s by
    default) instead of taking milliseconds. The backend does not ask for it."""
    storage = s3(seaweed.bucket, uuid.uuid4().hex, "inst-a", seaweed.endpoint,
                 seaweed.access_key, seaweed.secret_key, timeout_s=5.0, attempts=1)
    try:
        data = bytes(range(256)) * 4096  # 1 MiB, as a small Parquet file
        started = time.monotonic()
        storage.put_exclusive("_offsets/p/i+fs+d+2026-11-01+42", b"")  # an intent, as first
        storage.publish(storage.stage(data), PATH)
        assert time.monotonic() - started < 4.0
        assert storage.read(PATH) == data
    finally:
        storage.close()


def test_a_missing_bucket_is_a_missing_root_that_run_cannot_make(seaweed: Seaweed) -> None:
    wrong = s3(f"no-such-{uuid.uuid4().hex[:8]}", "garmadon", "inst-a", seaweed.endpoint,
               seaweed.access_key, seaweed.secret_key)
    try:
        assert wrong.root_state() == ROOT_MISSING
        with pytest.raises(ConfigError, match=r"bucket 'no-such-\w+' does not exist; create "
                                              r"it, or correct output.root"):
            wrong.create_root()
    finally:
        wrong.close()


def test_a_deleted_tree_leaves_no_directory_listed_a_hadoop_marker_included(
        storage: S3Storage) -> None:
    """SeaweedFS keeps the directory of a deleted key and lists it as a prefix; Hadoop's
    S3A (Spark's compaction) writes a key ``<dir>/`` for each directory it makes. Deleted
    through this backend (compaction's recovery before Spark: StoreFs), a swap's staging
    dir must go from its parent's listing, or the next recovery takes it for a crashed
    run's."""
    storage.put_exclusive("w/g1/part-00000.parquet", b"x")
    storage.put_exclusive("w/g1/00000/part-00001.parquet", b"y")
    storage._client.put_object(Bucket=storage.bucket, Key=storage._key("w/g2") + "/",
                               Body=b"")  # what S3A's mkdirs writes
    storage.put_exclusive("w/keep.json", b"{}")
    fs = StoreFs(storage, storage.uri)
    fs.delete_tree("w/g1")
    fs.delete_tree("w/g2")
    assert [(e.name, e.is_dir) for e in storage.list("w")] == [("keep.json", False)]
