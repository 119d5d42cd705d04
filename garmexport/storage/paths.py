"""Relative paths inside an output root, and the names of temp files.

Every backend takes ``/``-separated paths relative to its root. A path that could escape
the root (absolute, ``..``, empty parts) is a programming error: ValueError, never a
storage operation. Temp files live under ``_tmp/<instance>/`` (see
:mod:`garmexport.protocol.naming`), one fresh UUID per staged file, so two stagers never share a
name and ``gc_temp`` can tell temp files of every instance apart from output.
"""

from __future__ import annotations

import uuid

from garmexport.protocol.naming import TMP_DIR, check_label


def clean(path: str, *, allow_root: bool = False) -> str:
    """``path`` without leading/trailing ``/``; ValueError if it could leave the root.

    ``""`` (the root itself) is accepted only with ``allow_root`` (for listings).
    """
    stripped = path.strip("/")
    if not stripped:
        if allow_root:
            return ""
        raise ValueError("empty path")
    for part in stripped.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"path {path!r} has an empty, '.' or '..' part")
    return stripped


def join(*parts: str) -> str:
    """Join relative parts with ``/``, skipping empty ones."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def parent(path: str) -> str:
    """The parent of a relative path; ``""`` for a name directly under the root."""
    return path.rpartition("/")[0]


def tmp_dir(instance: str) -> str:
    """Directory of this instance's temp files, relative to the root."""
    return f"{TMP_DIR}/{check_label(instance, 'instance id')}"


def new_tmp_path(instance: str) -> str:
    """A fresh temp file path for ``instance``; never reused (random UUID)."""
    return f"{tmp_dir(instance)}/{uuid.uuid4().hex}"
