"""Compaction's file operations over the exporter's storage, for work done without Spark.

Why: a retried ``compact`` finishes a crashed swap before it starts Spark
(:mod:`.before_spark`). On a cluster Spark reaches the root through Hadoop's client
(``hdfs://``, ``s3a://``), which a Python process without a JVM does not have; the
exporter reaches the same files through its own backends (WebHDFS, S3, a local disk), so
:class:`StoreFs` gives :mod:`.swap`'s steps the :class:`.fs.FileOps` contract on top of a
:class:`garmexport.storage.base.Storage`:

- ``copy`` is a read of the source and an exclusive publish of its bytes
  (``put_exclusive``): it never overwrites (StorageError, as the contract says) and the
  copy appears whole or not at all. The bytes pass through this process, as they pass
  through the Spark driver in :class:`.fs.HadoopFs`;
- ``rename`` is that copy, then a delete of the source. A crash between the two leaves
  both, which :func:`.swap.roll_forward` already takes as a done rename (an object store
  has no rename either), and the lease's exclusivity rests on the publish alone;
- ``write`` deletes, then publishes: a reader sees the old content, nothing, or the new;
- ``delete_tree`` deletes the files below ``path``, deepest first, then the emptied
  directories (on an object store, the key a directory keeps there: S3A's marker, or
  SeaweedFS's emptied directory).

``uri`` is the root as Hive knows it (the Spark run's Hadoop URI), so that the locations
this run gives the metastore are the ones the Spark run would give.
"""

from __future__ import annotations

from garmexport.errors import PublishConflict, StorageError
from garmexport.storage.base import Entry, Storage


class StoreFs:
    """FileOps over ``store`` (see the module docstring); ``uri`` names its root for Hive."""

    def __init__(self, store: Storage, uri: str) -> None:
        self._store, self.uri = store, uri.rstrip("/")

    def root_state(self) -> str:
        return self._store.root_state()

    def list(self, path: str) -> list[Entry]:
        return self._store.list(path)

    def read(self, path: str) -> bytes:
        return self._store.read(path)

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:
        return self._store.read_tail(path, nbytes, size)

    def write(self, path: str, data: bytes) -> None:
        self._store.delete(path)
        self._store.put_exclusive(path, data)

    def copy(self, src: str, dst: str) -> None:
        try:
            data = self._store.read(src)
        except FileNotFoundError as exc:
            raise StorageError(f"copy {src} -> {dst}: no such file") from exc
        try:
            self._store.put_exclusive(dst, data)
        except PublishConflict as exc:
            raise StorageError(f"copy {src} -> {dst}: the target exists") from exc

    def rename(self, src: str, dst: str) -> None:
        self.copy(src, dst)
        self._store.delete(src)

    def delete(self, path: str) -> None:
        self._store.delete(path)

    def delete_tree(self, path: str) -> None:
        for e in self._store.list(path):
            if e.is_dir:
                self.delete_tree(f"{path}/{e.name}")
            else:
                self._store.delete(f"{path}/{e.name}")
        try:
            self._store._remove_empty_dir(path)  # noqa: SLF001 - the backends' own way
        except NotImplementedError:
            pass  # a backend with no directories to remove

    def close(self) -> None:
        self._store.close()
