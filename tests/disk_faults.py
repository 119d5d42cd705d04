"""Real storage faults for tests: an output root that refuses every change.

``frozen(root)`` marks every directory and file under ``root`` immutable (``chattr -R +i``,
ext4/xfs/btrfs/tmpfs as root): creating, linking, renaming and removing anything there
fails with EPERM, for root too (mode bits do not stop root), exactly as an unwritable
store does; reads still work. Leaving the block (or :meth:`Frozen.thaw`) lifts it. Tests
skip, saying why, where the file system or the process cannot do it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.system_tools import unavailable


def _chattr(flag: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["chattr", "-R", "-f", flag, str(root)], capture_output=True, text=True)


def require_immutable(probe_dir: Path) -> None:
    """Skip the test unless ``chattr +i`` works under ``probe_dir``."""
    probe = probe_dir / "chattr-probe"
    probe.mkdir(exist_ok=True)
    try:
        done = _chattr("+i", probe)
    except FileNotFoundError:
        unavailable("chattr is not installed (e2fsprogs): cannot make the store unwritable")
    try:
        if done.returncode != 0:
            unavailable(f"chattr +i refused here ({done.stderr.strip()}): needs root and ext4/xfs/btrfs/tmpfs")
        try:
            (probe / "x").touch()
        except PermissionError:
            return
        unavailable("chattr +i does not stop writes on this file system")
    finally:
        _chattr("-i", probe)
        probe.rmdir()


class Frozen:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.frozen = False

    def freeze(self) -> None:
        done = _chattr("+i", self.root)
        self.frozen = True
        assert done.returncode == 0, done.stderr

    def thaw(self) -> None:
        if self.frozen:
            done = _chattr("-i", self.root)
            self.frozen = False
            assert done.returncode == 0, done.stderr


@contextmanager
def frozen(root: Path) -> Iterator[Frozen]:
    """``root`` unwritable inside the block (see the module doc); always thawed after."""
    require_immutable(root.parent)
    f = Frozen(root)
    f.freeze()
    try:
        yield f
    finally:
        f.thaw()
