"""The storage interface: the few operations the commit protocol needs.

Paths are ``/``-separated and relative to the output root the backend was opened on.
Every backend gives these guarantees (each backend module restates how it keeps them):

- ``publish(staged, path)`` is exclusive: it makes ``path`` visible with the staged bytes,
  whole, or raises. If ``path`` exists it raises :class:`PublishConflict` and changes
  nothing: that is the fence between two owners of one partition. When it returns, the
  file is durable (fsynced, or acknowledged by the remote store).
- A staged file is invisible to readers of the output (it lives under ``_tmp/`` or outside
  the root) and is removed by ``discard`` or, after a crash, by ``gc_temp``.
- ``list`` is consistent with every publish that returned before it was called.
- Transient failures raise :class:`StorageError`; callers retry with back-off. An
  ambiguous publish (the store may or may not have done it) is resolved by the backend
  before it returns: it checks whether the path now holds exactly the staged bytes.

Only :mod:`garmexport.pipeline.publisher` calls ``publish``.

The root itself is looked at, never made, by opening a store for reading: ``root_state``
says whether it is there, and only ``garmexport run`` calls ``create_root``
(:mod:`garmexport.storage.root_check`), so a mistyped root is an error instead of a new
empty output that every check passes.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from garmexport.errors import StorageError
from garmexport.protocol.naming import TMP_DIR
from garmexport.storage import paths


#: what :meth:`Storage.root_state` finds at the output root
ROOT_DIRECTORY, ROOT_MISSING, ROOT_NOT_DIRECTORY = "directory", "missing", "not a directory"


@dataclass(frozen=True)
class Entry:
    """One name in a directory listing."""

    name: str
    is_dir: bool
    size: int = 0
    mtime_s: float = 0.0


@dataclass(frozen=True)
class Staged:
    """A durable temp file waiting to be published; ``handle`` is backend-specific."""

    handle: str
    size: int


class Storage(abc.ABC):
    """An output root on some file system or object store."""

    #: URI of the root, for messages and for Spark (``file:///...``, ``hdfs://...``).
    uri: str

    @abc.abstractmethod
    def list(self, path: str) -> list[Entry]:
        """Names directly under directory ``path``; ``[]`` when it does not exist."""

    @abc.abstractmethod
    def read(self, path: str) -> bytes:
        """The whole content of file ``path``; FileNotFoundError when missing."""

    @abc.abstractmethod
    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:
        """The last ``nbytes`` (or fewer) of file ``path`` and the file's size.

        Enough to read a Parquet footer without reading the data. ``size``: the file's size
        when the caller already knows it (a listing gave it); a store that would ask for it
        in a request of its own (WebHDFS) trusts it instead and returns it, so a file that
        changed since reads the wrong bytes (the footer check refuses them). Stores that
        learn the size with the read ignore it.
        """

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether file ``path`` exists."""

    @abc.abstractmethod
    def stage(self, data: bytes) -> Staged:
        """Write ``data`` to a durable temp file of this instance and return it."""

    @abc.abstractmethod
    def publish(self, staged: Staged, path: str) -> None:
        """Make the staged file visible as ``path``, exclusively (see module docstring).

        Raises PublishConflict if ``path`` exists (the staged file is kept: call
        ``discard``), StorageError on other failures. Creates parent directories.
        """

    @abc.abstractmethod
    def discard(self, staged: Staged) -> None:
        """Remove a staged file that will not be published (missing is fine)."""

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Remove file ``path``; missing is fine."""

    def gc_temp(self, older_than_s: float, now_s: float) -> int:
        """Remove temp files of any instance older than ``older_than_s``; return the count.

        An instance's temp directory goes too once it is older than the cut and held only
        old names; its removal is non-recursive, so a directory refilled since the listing
        stays (``stage`` recreates a removed one). The one implementation, over ``list``,
        :meth:`_remove_temp` and :meth:`_remove_empty_dir`.
        """
        cut = now_s - older_than_s
        removed = 0
        for inst in self.list(TMP_DIR):
            if not inst.is_dir:
                continue
            d = paths.join(TMP_DIR, inst.name)
            entries = self.list(d)
            for e in entries:
                if not e.is_dir and e.mtime_s < cut:
                    removed += self._remove_temp(paths.join(d, e.name))
            if inst.mtime_s < cut and all(e.mtime_s < cut for e in entries):
                self._remove_empty_dir(d)
        return removed

    def _remove_temp(self, path: str) -> bool:
        """Remove temp file ``path``; whether it was there (for ``gc_temp``)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no temp files")

    def _remove_empty_dir(self, path: str) -> None:
        """Remove directory ``path`` if it is empty; otherwise, or on failure, leave it."""
        raise NotImplementedError(f"{type(self).__name__} keeps no temp directories")

    def put_exclusive(self, path: str, data: bytes) -> None:
        """Stage and publish a file (data, markers, intents); PublishConflict if it exists.

        The one sequence of stage, publish, and discard of the staged file on any failure.
        """
        staged = self.stage(data)
        try:
            self.publish(staged, path)
        except BaseException:
            try:
                self.discard(staged)
            except StorageError:
                pass  # keep the publish's error; gc_temp removes the temp file later
            raise

    def root_state(self) -> str:
        """ROOT_DIRECTORY, ROOT_MISSING or ROOT_NOT_DIRECTORY (a file at the root); creates
        nothing. The default, for stores without a root to look at, is ROOT_DIRECTORY.
        Raises StorageError when the store cannot be asked."""
        return ROOT_DIRECTORY

    def create_root(self) -> str:
        """Make a missing root; return what was done, in words. The default has nothing to
        make. Raises ConfigError when the root cannot be made by us (a missing bucket)."""
        return "nothing to create"

    def close(self) -> None:
        """Release connections; the default has none."""
