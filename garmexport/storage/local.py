"""Local file system backend (the default): a directory is the output root.

How it keeps the guarantees of :mod:`garmexport.storage.base`:

- stage: the bytes go to ``<root>/_tmp/<instance>/<uuid>`` (created ``O_EXCL``), then
  ``fsync``. The temp directory is not fsynced: a temp file lost in a crash is harmless,
  and the final name is made durable at publish.
- publish: parents are created (each new directory's parent is fsynced), then
  ``link(temp, final)``, which fails with EEXIST if ``final`` exists and never replaces
  it: an exclusive publish in one system call. Then the final directory is fsynced (the
  name survives a power cut once publish returns) and the temp name unlinked. A crash
  between link and unlink leaves a temp name that ``gc_temp`` removes; the final file
  is already whole. The Staged handle carries the temp file's inode, so a publish
  repeated after a failure half-way (fsync error) recognises its own file at the final
  name and completes instead of reporting a conflict.
- where hard links are refused (EPERM, EXDEV, ENOTSUP: some FUSE or SMB mounts), the
  fallback is ``renameat2(..., RENAME_NOREPLACE)`` through libc (Linux >= 3.15, glibc >=
  2.28), the kernel's own atomic "rename unless the target exists". If that is also
  unsupported, publish raises StorageError: a plain ``rename`` would silently replace a
  winner's file, and an ``O_EXCL`` placeholder renamed over later would show readers an
  empty ``.parquet`` (and leave one after a crash), so neither is offered.
- list is a ``scandir`` (names, sizes, mtimes in one pass); read_tail seeks.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

from garmexport.errors import PublishConflict, StorageError
from garmexport.storage import paths
from garmexport.storage.base import (
    ROOT_DIRECTORY, ROOT_MISSING, ROOT_NOT_DIRECTORY, Entry, Staged, Storage,
)

_NO_LINK = {errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK}
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


def rename_noreplace(src: str, dst: str) -> None:
    """Rename ``src`` to ``dst`` unless ``dst`` exists (FileExistsError), atomically.

    Raises OSError(ENOSYS/EINVAL) where the kernel, libc or file system cannot do it.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        raise OSError(errno.ENOSYS, "libc has no renameat2")
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), dst)


def _place(temp: str, final: str) -> None:
    """Give ``temp``'s inode the name ``final`` unless it exists (FileExistsError)."""
    try:
        os.link(temp, final)
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        rename_noreplace(temp, final)


def _split(handle: str) -> tuple[int, str]:
    """(inode, temp path) of a Staged handle ``"<inode>:<temp path>"``."""
    ino, _, rel = handle.partition(":")
    return int(ino), rel


def _holds(final: str, ino: int) -> bool:
    """Whether ``final`` is the staged inode ``ino`` (our publish already happened)."""
    try:
        return os.stat(final).st_ino == ino
    except FileNotFoundError:
        return False


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStorage(Storage):
    """Output root ``root`` (a directory) on a local file system; created if missing
    unless ``create`` is False (the commands that only read it)."""

    def __init__(self, root: str | os.PathLike[str], instance: str, create: bool = True) -> None:
        self.root = os.path.abspath(root)
        self.instance = instance
        self._tmp = paths.tmp_dir(instance)
        self.uri = Path(self.root).as_uri()
        if create:
            self.create_root()

    def root_state(self) -> str:
        if os.path.isdir(self.root):
            return ROOT_DIRECTORY
        return ROOT_NOT_DIRECTORY if os.path.lexists(self.root) else ROOT_MISSING

    def create_root(self) -> str:
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {self.root}: {exc}") from exc
        return "created the directory"

    def _abs(self, path: str, *, allow_root: bool = False) -> str:
        return os.path.join(self.root, paths.clean(path, allow_root=allow_root))

    def list(self, path: str) -> list[Entry]:
        out = []
        try:
            with os.scandir(self._abs(path, allow_root=True)) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed between readdir and stat
                    out.append(Entry(e.name, e.is_dir(follow_symlinks=False), st.st_size,
                                     st.st_mtime))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise StorageError(f"cannot list {path}: {exc}") from exc
        return out

    def read(self, path: str) -> bytes:
        try:
            with open(self._abs(path), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:
        try:
            with open(self._abs(path), "rb") as f:
                real = os.fstat(f.fileno()).st_size  # free: ``size`` is not needed
                f.seek(max(0, real - max(0, nbytes)))
                return f.read(), real
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc

    def exists(self, path: str) -> bool:
        return os.path.isfile(self._abs(path))

    def stage(self, data: bytes) -> Staged:
        rel = paths.new_tmp_path(self.instance)
        full = self._abs(rel)
        try:
            try:
                fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileNotFoundError:
                # First stage of this instance, or gc_temp removed the empty directory.
                os.makedirs(os.path.dirname(full), exist_ok=True)
                fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                ino = os.fstat(fd).st_ino
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self._unlink_quietly(full)
            raise StorageError(f"cannot stage {len(data)} bytes in {self._tmp}: {exc}") from exc
        return Staged(f"{ino}:{rel}", len(data))

    def publish(self, staged: Staged, path: str) -> None:
        ino, rel = _split(staged.handle)
        temp, final = self._abs(rel), self._abs(path)
        try:
            self._makedirs_durable(os.path.dirname(final))
            try:
                _place(temp, final)
            except (FileExistsError, FileNotFoundError):
                # Exists: another owner won, or our own earlier attempt did (its fsync
                # failed after the link, say). Missing temp: an earlier rename moved it.
                if not _holds(final, ino):
                    if os.path.exists(final):
                        raise PublishConflict(path) from None
                    raise
            _fsync_dir(os.path.dirname(final))
        except PublishConflict:
            raise
        except OSError as exc:
            raise StorageError(f"cannot publish {path}: {exc}") from exc
        try:
            os.unlink(temp)  # the second name of the linked inode; gc_temp if this fails
        except OSError:
            pass

    def put_exclusive(self, path: str, data: bytes) -> None:
        """An empty file (an intent) has no content that could be seen torn, so it is
        created in place with O_EXCL: one directory fsync instead of a staged write."""
        if data:
            super().put_exclusive(path, data)
            return
        final = self._abs(path)
        try:
            self._makedirs_durable(os.path.dirname(final))
            os.close(os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            _fsync_dir(os.path.dirname(final))
        except FileExistsError:
            raise PublishConflict(path) from None
        except OSError as exc:
            raise StorageError(f"cannot create {path}: {exc}") from exc

    def _makedirs_durable(self, directory: str) -> None:
        """Create ``directory`` and missing parents, fsyncing the parent of each new one."""
        if os.path.isdir(directory):
            return
        up = os.path.dirname(directory)
        if up != directory:
            self._makedirs_durable(up)
        try:
            os.mkdir(directory)
        except FileExistsError:
            return  # another publisher made it; it fsyncs its parent
        _fsync_dir(up)

    def discard(self, staged: Staged) -> None:
        self._unlink_quietly(self._abs(_split(staged.handle)[1]))

    def delete(self, path: str) -> None:
        try:
            os.unlink(self._abs(path))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"cannot delete {path}: {exc}") from exc

    def _remove_temp(self, path: str) -> bool:
        return self._unlink_quietly(self._abs(path))

    def _remove_empty_dir(self, path: str) -> None:
        try:
            os.rmdir(self._abs(path))  # only if empty; stage recreates it
        except OSError:
            pass

    @staticmethod
    def _unlink_quietly(full: str) -> bool:
        try:
            os.unlink(full)
            return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot remove {full}: {exc}") from exc
