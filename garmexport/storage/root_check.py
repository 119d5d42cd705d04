"""The output root before a command uses it: there and a directory, or one clear error.

Only ``garmexport run`` creates a missing root (and logs that it did): ``verify``,
``offsets`` and ``compact`` on a mistyped path, a wrong bucket or a wrong HDFS path would
otherwise read an empty output and report it as fine. ``run`` also writes a first (empty)
temp file and removes it: a root this user may not write is refused at start-up instead of
being retried for minutes as an outage. Every error here is one line naming the setting,
the value and what to do: ConfigError for a root that is wrong or that this user may not
read or write (StorageDenied from the store), StorageError for a store that does not answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TypeVar

from garmexport.errors import ConfigError, StorageDenied, StorageError
from garmexport.storage.base import ROOT_MISSING, ROOT_NOT_DIRECTORY, Storage
from garmexport.storage.open import open_storage
from garmexport.storage.options import StorageOptions

SETTING = "output.root (GARMEXPORT_OUTPUT_ROOT)"
T = TypeVar("T")


def _asking(root: str, call: Callable[[], T], doing: str = "read") -> T:
    """``call()``; a StorageError is said again with the setting and what to do."""
    try:
        return call()
    except StorageDenied as exc:
        raise _denied(root, doing, exc) from exc
    except StorageError as exc:
        raise StorageError(f"{SETTING} = {root!r}: {exc}: check that the store is up and that "
                           "this user may read it (run: and create it)") from exc


def _denied(root: str, doing: str, exc: StorageDenied) -> ConfigError:
    return ConfigError(f"{SETTING} = {root!r}: this user may not {doing} it: {exc}: give the "
                       "user garmexport runs as (output.hdfs_user, or its Kerberos principal) "
                       f"the right to {doing} it, or choose another root")


def _not_a_directory(root: str, setting: str = SETTING) -> ConfigError:
    return ConfigError(f"{setting} = {root!r} is a file, not a directory: point it at the "
                       "output directory")


def require(state: str, root: str, setting: str = SETTING) -> None:
    """Raise ConfigError unless ``state`` (a ``root_state()``) is a directory."""
    if state == ROOT_MISSING:
        raise ConfigError(f"{setting} = {root!r} does not exist: correct the path, bucket or "
                          "HDFS path, or create it; only 'garmexport run' creates it itself")
    if state == ROOT_NOT_DIRECTORY:
        raise _not_a_directory(root, setting)


def open_existing(root: str, instance: str, options: StorageOptions | None = None) -> Storage:
    """The store of ``root`` for a command that reads it; creates nothing. Raises
    ConfigError when the root is missing or not a directory, StorageError when the store
    cannot tell."""
    storage = open_storage(root, instance, options, create=False)
    try:
        require(_asking(root, storage.root_state), root)
    except BaseException:
        storage.close()
        raise
    return storage


def prepare_for_run(root: str, instance: str, options: StorageOptions | None = None,
                    ) -> str | None:
    """Create ``root`` if it is missing; what was done, in words, or None when it was
    there. Raises ConfigError when it is a file (or a bucket that does not exist),
    StorageError when the store cannot tell or make it."""
    storage = open_storage(root, instance, options, create=False)
    try:
        state = _asking(root, storage.root_state)
        if state == ROOT_NOT_DIRECTORY:
            raise _not_a_directory(root)
        done = _asking(root, storage.create_root, "write") if state == ROOT_MISSING else None
        _may_write(root, storage)
        return done
    finally:
        storage.close()


def _may_write(root: str, storage: Storage) -> None:
    """Stage an empty temp file and remove it: ConfigError when the store refuses this user
    (a root of another user). Any other failure (a store in safe mode, over its quota, down
    since it answered) is left to the exporter, which pauses and retries until it passes;
    a store whose staging makes no call (S3's is in memory) is not asked anything."""
    try:
        staged = storage.stage(b"")
    except StorageDenied as exc:
        raise _denied(root, "write", exc) from exc
    except StorageError:
        return
    with contextlib.suppress(StorageError):
        storage.discard(staged)
