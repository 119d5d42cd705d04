"""A store whose calls are counted: what the NameNode or the object store is asked, by kind.

A small file costs the store as much as a big one, so how many calls an exporter makes per
event is a cost of its own (README, Sizing). :class:`CountedStorage` wraps the store an
exporter opens and calls ``count(op)`` before each call it passes on: ``list``, ``read``,
``read_tail``, ``exists``, ``put`` (a file created under its final name: a data file, an
intent or a marker; a temp file and an exclusive rename, or a conditional copy on an
object store, or created in place for an empty intent on a local disk or HDFS: the
store's own ``put_exclusive``), ``stage``, ``publish`` and ``discard`` (the same steps called one by
one), and ``delete`` (a temp file's or a directory's removal by the temp collection counts
as ``delete`` too). ``gc_temp`` is the base class's, over the counted calls. Nothing else
changes: each call goes to the wrapped store's own method, whose errors, retries and
answers pass through as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from garmexport.storage.base import Entry, Staged, Storage


class CountedStorage(Storage):
    def __init__(self, inner: Storage, count: Callable[[str], None]) -> None:
        self.inner, self._count = inner, count
        self.uri = inner.uri

    def list(self, path: str) -> list[Entry]:
        self._count("list")
        return self.inner.list(path)

    def read(self, path: str) -> bytes:
        self._count("read")
        return self.inner.read(path)

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:
        self._count("read_tail")
        return self.inner.read_tail(path, nbytes, size)

    def exists(self, path: str) -> bool:
        self._count("exists")
        return self.inner.exists(path)

    def put_exclusive(self, path: str, data: bytes) -> None:
        self._count("put")
        self.inner.put_exclusive(path, data)

    def stage(self, data: bytes) -> Staged:
        self._count("stage")
        return self.inner.stage(data)

    def publish(self, staged: Staged, path: str) -> None:
        self._count("publish")
        self.inner.publish(staged, path)

    def discard(self, staged: Staged) -> None:
        self._count("discard")
        self.inner.discard(staged)

    def delete(self, path: str) -> None:
        self._count("delete")
        self.inner.delete(path)

    def _remove_temp(self, path: str) -> bool:
        self._count("delete")
        return self.inner._remove_temp(path)

    def _remove_empty_dir(self, path: str) -> None:
        self._count("delete")
        self.inner._remove_empty_dir(path)

    def root_state(self) -> str:
        return self.inner.root_state()

    def create_root(self) -> str:
        return self.inner.create_root()

    def close(self) -> None:
        self.inner.close()
