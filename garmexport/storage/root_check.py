"""The output root before a command uses it: there and a directory, or one clear error.

Only ``garmexport run`` creates a missing root (and logs that it did): ``verify``,
``offsets`` and ``compact`` on a mistyped path, a wrong bucket or a wrong HDFS path would
otherwise read an empty output and report it as fine. Every error here is one
:class:`ConfigError` line naming the setting, the value and what to do.
"""

from __future__ import annotations

from garmexport.errors import ConfigError
from garmexport.storage.base import ROOT_MISSING, ROOT_NOT_DIRECTORY, Storage
from garmexport.storage.open import open_storage
from garmexport.storage.options import StorageOptions

SETTING = "output.root (GARMEXPORT_OUTPUT_ROOT)"


def _not_a_directory(root: str) -> ConfigError:
    return ConfigError(f"{SETTING} = {root!r} is a file, not a directory: point it at the "
                       "output directory")


def open_existing(root: str, instance: str, options: StorageOptions | None = None) -> Storage:
    """The store of ``root`` for a command that reads it; creates nothing. Raises
    ConfigError when the root is missing or not a directory."""
    storage = open_storage(root, instance, options, create=False)
    state = storage.root_state()
    if state == ROOT_MISSING:
        storage.close()
        raise ConfigError(f"{SETTING} = {root!r} does not exist: correct the path, bucket or "
                          "HDFS path; only 'garmexport run' creates it")
    if state == ROOT_NOT_DIRECTORY:
        storage.close()
        raise _not_a_directory(root)
    return storage


def prepare_for_run(root: str, instance: str, options: StorageOptions | None = None,
                    ) -> str | None:
    """Create ``root`` if it is missing; what was done, in words, or None when it was
    there. Raises ConfigError when it is a file (or a bucket that does not exist)."""
    storage = open_storage(root, instance, options, create=False)
    try:
        state = storage.root_state()
        if state == ROOT_NOT_DIRECTORY:
            raise _not_a_directory(root)
        return storage.create_root() if state == ROOT_MISSING else None
    finally:
        storage.close()
