"""File operations compaction needs, on any Hadoop URI (through Spark's JVM) or locally.

The compaction job must run unchanged against ``hdfs://``, ``s3a://`` or ``file://`` roots,
so its file operations go through the Hadoop FileSystem API of the Spark driver
(:class:`HadoopFs`). For ``file://`` roots :func:`open_fs` uses :class:`LocalFs`, the same
operations with plain OS calls: one py4j round trip per call costs about as much as reading
a small footer, and a day holds thousands of files. Paths are ``/``-separated, relative to
the root.

Contracts: ``root_state`` looks at the root and creates nothing (compaction never makes a
root: :mod:`garmexport.storage.root_check`); ``list`` of a missing directory is ``[]``;
``delete``/``delete_tree`` of a missing path is fine; ``rename`` and ``copy`` create the
target's parent directory and never overwrite (raise StorageError if the target exists
or the call fails; a copy appears whole or not at all); ``write`` replaces the file
through a hidden temp name and a
rename, so a reader sees the old content, nothing, or the new content, never a part;
``read``/``read_tail`` of a missing file raise FileNotFoundError (Hadoop's client throws
Java's FileNotFoundException, which py4j would hand on as its own error type: a missing
``_COMPLETE`` then stopped every run on ``hdfs://`` and ``s3a://`` at its first mark).
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Protocol

from garmexport.errors import StorageError
from garmexport.storage.base import ROOT_DIRECTORY, ROOT_MISSING, ROOT_NOT_DIRECTORY, Entry


class FileOps(Protocol):
    uri: str

    def root_state(self) -> str: ...  # ROOT_DIRECTORY, ROOT_MISSING or ROOT_NOT_DIRECTORY
    def list(self, path: str) -> list[Entry]: ...
    def read(self, path: str) -> bytes: ...
    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]: ...
    def write(self, path: str, data: bytes) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def copy(self, src: str, dst: str) -> None: ...
    def delete(self, path: str) -> None: ...
    def delete_tree(self, path: str) -> None: ...


def _tmp_name(path: str) -> str:
    head, _, name = path.rpartition("/")
    return f"{head}/.{name}.tmp" if head else f".{name}.tmp"


class LocalFs:
    """FileOps on a local directory."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.uri = "file://" + self.root

    def _p(self, path: str) -> str:
        return os.path.join(self.root, path)

    def root_state(self) -> str:
        if os.path.isdir(self.root):
            return ROOT_DIRECTORY
        return ROOT_NOT_DIRECTORY if os.path.lexists(self.root) else ROOT_MISSING

    def list(self, path: str) -> list[Entry]:
        """The entries of ``path``; none when it does not exist. An entry removed between
        the directory read and its stat (another run's temp file, renamed away) is left
        out: before, its FileNotFoundError ended the listing, read as "no such directory",
        so a directory being written to could list empty."""
        out = []
        try:
            it = os.scandir(self._p(path))
        except FileNotFoundError:
            return []
        with it:
            for e in it:
                try:
                    is_dir = e.is_dir()
                    size = 0 if is_dir else e.stat().st_size
                except FileNotFoundError:
                    continue
                out.append(Entry(e.name, is_dir, size))
        return out

    def read(self, path: str) -> bytes:
        with open(self._p(path), "rb") as f:
            return f.read()

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:  # size: not needed
        with open(self._p(path), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - nbytes))
            return f.read(), size

    def write(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(self._p(path)), exist_ok=True)
        tmp = self._p(_tmp_name(path))
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._p(path))

    def rename(self, src: str, dst: str) -> None:
        os.makedirs(os.path.dirname(self._p(dst)), exist_ok=True)
        try:
            os.link(self._p(src), self._p(dst))  # fails if dst exists: no overwrite
        except OSError as exc:
            raise StorageError(f"rename {src} -> {dst}: {exc}") from exc
        os.unlink(self._p(src))

    def copy(self, src: str, dst: str) -> None:
        """A hard link: data files are never changed once published, so sharing the inode
        costs no bytes; a plain copy (through a temp name) where links are refused."""
        os.makedirs(os.path.dirname(self._p(dst)), exist_ok=True)
        try:
            os.link(self._p(src), self._p(dst))
            return
        except FileExistsError as exc:
            raise StorageError(f"copy {src} -> {dst}: {exc}") from exc
        except OSError:
            pass  # EXDEV, EPERM: no hard links here
        tmp = self._p(_tmp_name(dst))
        try:
            shutil.copyfile(self._p(src), tmp)
            os.link(tmp, self._p(dst))
        except OSError as exc:
            raise StorageError(f"copy {src} -> {dst}: {exc}") from exc
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def delete(self, path: str) -> None:
        try:
            os.unlink(self._p(path))
        except FileNotFoundError:
            pass

    def delete_tree(self, path: str) -> None:
        shutil.rmtree(self._p(path), ignore_errors=True)


class HadoopFs:
    """FileOps through the Hadoop FileSystem of a Spark driver (any Hadoop URI)."""

    def __init__(self, spark: Any, uri: str) -> None:
        self.uri = uri.rstrip("/")
        self._jvm = spark._jvm
        self._Path = self._jvm.org.apache.hadoop.fs.Path
        self._conf = spark._jsc.hadoopConfiguration()
        self._fs = self._Path(self.uri).getFileSystem(self._conf)
        # No .crc side files from the local checksum file system (no-op elsewhere).
        self._fs.setWriteChecksum(False)

    def _p(self, path: str) -> Any:
        return self._Path(f"{self.uri}/{path}")

    def root_state(self) -> str:
        root = self._Path(self.uri)
        if not self._fs.exists(root):
            return ROOT_MISSING
        return ROOT_DIRECTORY if self._fs.getFileStatus(root).isDirectory() else ROOT_NOT_DIRECTORY

    def list(self, path: str) -> list[Entry]:
        p = self._p(path)
        if not self._fs.exists(p):
            return []
        return [Entry(s.getPath().getName(), s.isDirectory(), s.getLen())
                for s in self._fs.listStatus(p)]

    def read(self, path: str) -> bytes:
        return self.read_tail(path, 1 << 62)[0]

    def _missing(self, exc: Exception) -> bool:
        """Whether ``exc`` (py4j's) carries Java's FileNotFoundException."""
        java = getattr(exc, "java_exception", None)
        return java is not None and bool(
            self._jvm.java.lang.Class.forName("java.io.FileNotFoundException").isInstance(java))

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:  # size: not needed
        p = self._p(path)
        try:
            size = self._fs.getFileStatus(p).getLen()
            stream = self._fs.open(p)
        except Exception as exc:  # py4j's Py4JJavaError, whatever the JVM threw
            if self._missing(exc):
                raise FileNotFoundError(f"{self.uri}/{path}: no such file") from None
            raise
        n = min(size, nbytes)
        try:
            stream.seek(size - n)
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream, n)
        finally:
            stream.close()
        return bytes(data), size

    def write(self, path: str, data: bytes) -> None:
        tmp = self._p(_tmp_name(path))
        out = self._fs.create(tmp, True)
        try:
            out.write(bytearray(data))
            out.hsync()
        finally:
            out.close()
        self._fs.delete(self._p(path), False)
        if not self._fs.rename(tmp, self._p(path)):
            raise StorageError(f"write {path}: rename of the temp file failed")

    def rename(self, src: str, dst: str) -> None:
        self._fs.mkdirs(self._p(dst).getParent())  # HDFS refuses a rename into a missing dir
        if self._fs.exists(self._p(dst)) or not self._fs.rename(self._p(src), self._p(dst)):
            raise StorageError(f"rename {src} -> {dst} failed (target exists or source missing)")

    def copy(self, src: str, dst: str) -> None:
        """A byte copy through the driver into a hidden temp name, then a rename."""
        tmp = self._p(_tmp_name(dst))
        copied = self._jvm.org.apache.hadoop.fs.FileUtil.copy(
            self._fs, self._p(src), self._fs, tmp, False, True, self._conf)
        if not copied:
            raise StorageError(f"copy {src} -> {dst} failed")
        self.rename(_tmp_name(dst), dst)

    def delete(self, path: str) -> None:
        self._fs.delete(self._p(path), False)

    def delete_tree(self, path: str) -> None:
        p = self._p(path)
        self._fs.delete(p, True)
        if self._fs.exists(p):  # emptied directories an object store kept (below)
            self._delete_empty_dirs(p)

    def _delete_empty_dirs(self, p: Any) -> None:
        """Delete the directories left below ``p``, deepest first, then ``p``.

        S3A deletes a tree by deleting the keys a recursive listing finds; SeaweedFS lists
        no directories there but keeps every emptied one (and lists it, to S3A too, as
        a directory), so a swap's staging dir outlived its delete and the next run took
        it for a crashed run's. Deleted one by one, each empty directory goes (S3A then
        deletes its own key, which SeaweedFS honours).
        """
        for status in self._fs.listStatus(p):
            if status.isDirectory():
                self._delete_empty_dirs(status.getPath())
        self._fs.delete(p, True)


def open_fs(spark: Any, uri: str) -> FileOps:
    """LocalFs for ``file://`` roots (fast), HadoopFs through ``spark`` for the rest."""
    if uri.startswith("file://"):
        return LocalFs(uri[len("file://"):])
    return HadoopFs(spark, uri)
