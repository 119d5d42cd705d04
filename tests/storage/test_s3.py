"""S3 backend details against a real SeaweedFS server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from garmexport.errors import PublishConflict, StorageError
from garmexport.storage.s3 import STAGE_TAG, S3Storage
from tests.seaweed import Seaweed

PATH = "fs/day=2026-11-01/local+t+00000+00000000000000000042.parquet"


@pytest.fixture
def storage(seaweed: Seaweed) -> Iterator[S3Storage]:
    s = S3Storage(seaweed.bucket, uuid.uuid4().hex, "inst-a", endpoint_url=seaweed.endpoint,
                  access_key=seaweed.access_key, secret_key=seaweed.secret_key)
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
    other = S3Storage(seaweed.bucket, storage.prefix, "inst-b", endpoint_url=seaweed.endpoint,
                      access_key=seaweed.access_key, secret_key=seaweed.secret_key)
    staged = other.stage(b"x")
    with pytest.raises(StorageError, match="unknown staged handle"):
        storage.publish(staged, PATH)
    other.close()


def test_an_unreachable_store_is_a_storage_error() -> None:
    storage = S3Storage("b", "p", "inst-a", endpoint_url="http://127.0.0.1:9",
                        access_key="k", secret_key="s", attempts=1, timeout_s=2)
    with pytest.raises(StorageError):
        storage.list("")
    with pytest.raises(StorageError):
        storage.publish(storage.stage(b"x"), PATH)  # unanswered, then unsettled
    storage.close()


def test_credentials_never_show_in_repr(seaweed: Seaweed) -> None:
    storage = S3Storage(seaweed.bucket, "p", "inst-a", endpoint_url=seaweed.endpoint,
                        access_key=seaweed.access_key, secret_key=seaweed.secret_key)
    assert seaweed.secret_key not in repr(storage) and seaweed.access_key not in repr(storage)
    storage.close()

