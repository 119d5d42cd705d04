"""S3-compatible object store backend (AWS S3, SeaweedFS, MinIO, ...) through botocore.

Why botocore: the fence is a conditional PUT (``If-None-Match: *``: create the key only
if it does not exist). ``pyarrow.fs.S3FileSystem`` cannot send it, and fsspec/s3fs
would only wrap the same botocore (through aiobotocore) with an async layer we do not
need. botocore (without boto3, which adds nothing we use) signs requests, retries and
exposes ``put_object(IfNoneMatch="*")``. Checked against SeaweedFS 4.48: it answers
412 PreconditionFailed to a second conditional PUT, and in races of 8 threads on one
key exactly one PUT succeeded every time (tests/storage re-checks this).

How it keeps the guarantees of :mod:`garmexport.storage.base`:

- stage keeps the bytes in memory (the caller holds them anyway): an object is written
  by one PUT of its final key, so nothing is ever visible half-written, and a crash
  leaves nothing to clean (``gc_temp`` has nothing to do and returns 0). A Staged value
  can only be published through the Storage object that staged it.
- publish: ``PUT`` with ``If-None-Match: *`` and a metadata tag holding the stage id.
  412 means the key exists. Whether it is someone else's object or our own (a retry of
  a PUT whose answer was lost, by botocore or by us) is settled by HEAD: our stage id
  -> done, another -> PublishConflict. A lost answer, 5xx or 409 (a concurrent
  conditional write) are settled the same way; a missing key then gives StorageError
  (retryable). S3 acknowledges a PUT only once the object is durable.
- list: ListObjectsV2 with delimiter ``/`` (common prefixes are the directories; a
  directory's own key ``<dir>/``, which S3A and SeaweedFS keep, is not listed, and goes
  with :meth:`S3Storage._remove_empty_dir` once nothing else is below it).
- credentials: ``output.s3_access_key_id``/``s3_secret_access_key`` (endpoint and region:
  ``s3_endpoint_url``/``s3_region``) or the usual AWS environment and config files; they
  are never logged or shown in repr.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import botocore.handlers
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from garmexport.errors import ConfigError, PublishConflict, StorageError
from garmexport.storage import paths
from garmexport.storage.base import ROOT_DIRECTORY, ROOT_MISSING, Entry, Staged, Storage
from garmexport.storage.options import S3Options

STAGE_TAG = "garmexport-stage"  # x-amz-meta-garmexport-stage: which stage() wrote it


class S3Storage(Storage):
    """Output root ``s3://bucket/prefix``."""

    def __init__(self, bucket: str, prefix: str, instance: str, *, options: S3Options) -> None:
        self.bucket, self.instance = bucket, instance
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        o = options
        config = Config(s3={"addressing_style": o.addressing_style},
                        # total_max_attempts counts the first try (max_attempts does not)
                        retries={"mode": "standard", "total_max_attempts": o.attempts},
                        connect_timeout=o.timeout_s, read_timeout=o.timeout_s)
        self._client: Any = botocore.session.get_session().create_client(
            "s3", endpoint_url=o.endpoint_url, region_name=o.region or "us-east-1",
            aws_access_key_id=o.access_key_id, aws_secret_access_key=o.secret_access_key,
            config=config)
        # No "Expect: 100-continue" on uploads: SeaweedFS 4.48 answers it in a way urllib3
        # cannot parse, and the PUT then hangs until the read timeout. A body is one file,
        # sent once; waiting for the 100 first saves nothing when the PUT is accepted.
        self._client.meta.events.unregister("before-call.s3", botocore.handlers.add_expect_header)
        self._staged: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"S3Storage({self.uri!r})"  # never the credentials

    def _key(self, path: str, *, allow_root: bool = False) -> str:
        return paths.join(self.prefix, paths.clean(path, allow_root=allow_root))

    def list(self, path: str) -> list[Entry]:
        base = self._key(path, allow_root=True)
        base = base + "/" if base else ""
        out: list[Entry] = []
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=base, Delimiter="/"):
                for p in page.get("CommonPrefixes", []):
                    out.append(Entry(p["Prefix"][len(base):].rstrip("/"), True))
                for o in page.get("Contents", []):
                    name = o["Key"][len(base):]
                    if name:  # a "directory marker" object equal to the prefix itself
                        out.append(Entry(name, False, o["Size"], o["LastModified"].timestamp()))
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot list {self.uri}/{base}: {exc}") from exc
        return out

    def read(self, path: str) -> bytes:
        return self._get(path)[0]

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:
        # a suffix range needs no size: ``size`` is not used
        if nbytes <= 0:
            return b"", self._head(path)["ContentLength"]
        try:
            data, res = self._get(path, Range=f"bytes=-{nbytes}")
        except StorageError as exc:
            if _code(exc.__cause__) != "InvalidRange":
                raise
            return b"", self._head(path)["ContentLength"]  # an empty object has no range
        content_range = res.get("ContentRange")  # "bytes 10-19/20"
        size = int(content_range.rpartition("/")[2]) if content_range else len(data)
        return data, size

    def _get(self, path: str, **kw: Any) -> tuple[bytes, dict[str, Any]]:
        key = self._key(path)
        try:
            res = self._client.get_object(Bucket=self.bucket, Key=key, **kw)
            with res["Body"] as body:
                return body.read(), res
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                raise FileNotFoundError(f"{self.uri}/{path}") from None
            raise StorageError(f"cannot read {key}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot read {key}: {exc}") from exc

    def _head(self, path: str) -> dict[str, Any]:
        """HEAD of ``path``; FileNotFoundError when missing."""
        try:
            return self._client.head_object(Bucket=self.bucket, Key=self._key(path))
        except ClientError as exc:
            if _code(exc) in ("404", "NoSuchKey", "NotFound"):
                raise FileNotFoundError(f"{self.uri}/{path}") from None
            raise StorageError(f"cannot stat {path}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot stat {path}: {exc}") from exc

    def exists(self, path: str) -> bool:
        try:
            self._head(path)
            return True
        except FileNotFoundError:
            return False

    def stage(self, data: bytes) -> Staged:
        handle = uuid.uuid4().hex
        with self._lock:
            self._staged[handle] = data
        return Staged(handle, len(data))

    def publish(self, staged: Staged, path: str) -> None:
        with self._lock:
            data = self._staged.get(staged.handle)
        if data is None:
            raise StorageError(f"unknown staged handle {staged.handle}: staged elsewhere?")
        key = self._key(path)
        try:
            self._client.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*",
                                    Metadata={STAGE_TAG: staged.handle})
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if status not in (409, 412) and status < 500:
                raise StorageError(f"cannot publish {key}: {exc}") from exc
            self._settle(staged, path)
        except BotoCoreError:  # no answer: the PUT may or may not have happened
            self._settle(staged, path)
        with self._lock:
            self._staged.pop(staged.handle, None)

    def _settle(self, staged: Staged, path: str) -> None:
        """Decide a PUT that lost, failed or went unanswered from the object's stage tag."""
        try:
            head = self._head(path)
        except FileNotFoundError:
            raise StorageError(f"publish of {path} did not happen; staged bytes kept") from None
        if head.get("Metadata", {}).get(STAGE_TAG) == staged.handle:
            return  # our own PUT landed; its answer was lost or repeated
        raise PublishConflict(path)

    def discard(self, staged: Staged) -> None:
        with self._lock:
            self._staged.pop(staged.handle, None)

    def delete(self, path: str) -> None:
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(path))
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot delete {path}: {exc}") from exc

    def _remove_empty_dir(self, path: str) -> None:
        """Delete the directory's own key ``<path>/`` when no other key is below it.

        garmexport makes no directories on S3, but Hadoop's S3A (Spark's compaction)
        writes a marker object ``<dir>/`` for every directory it makes, and a filer-backed
        store (SeaweedFS) keeps the emptied directory of a deleted key and lists it as that
        same key: either way the prefix stays listed as a directory once every file below
        it is gone, and a swap's staging dir, deleted through this backend, still looked
        like a crashed run's at the next recovery. Failures leave it, as the contract says.
        """
        prefix = self._key(path) + "/"
        try:
            page = self._client.list_objects_v2(Bucket=self.bucket, Prefix=prefix,
                                                Delimiter="/", MaxKeys=2)
            if ([o["Key"] for o in page.get("Contents", [])] == [prefix]
                    and not page.get("CommonPrefixes")):
                self._client.delete_object(Bucket=self.bucket, Key=prefix)
        except (ClientError, BotoCoreError):
            pass

    def _bucket_exists(self) -> bool:
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _code(exc) in ("404", "NoSuchBucket", "NotFound"):
                return False
            raise StorageError(f"cannot look at bucket {self.bucket}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot look at bucket {self.bucket}: {exc}") from exc
        return True

    def root_state(self) -> str:
        """Missing: no such bucket, or (with a prefix) no object under the prefix. An S3
        prefix exists only through its objects, and every running exporter writes some."""
        if not self._bucket_exists():
            return ROOT_MISSING
        return ROOT_DIRECTORY if not self.prefix or self.list("") else ROOT_MISSING

    def create_root(self) -> str:
        if not self._bucket_exists():
            raise ConfigError(f"output.root {self.uri}: bucket {self.bucket!r} does not exist; "
                              "create it, or correct output.root")
        return "nothing to create: the first file published makes the prefix"

    def gc_temp(self, older_than_s: float, now_s: float) -> int:
        return 0  # staged bytes never leave the process (see module docstring)

    def close(self) -> None:
        self._client.close()


def _code(exc: BaseException | None) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""
