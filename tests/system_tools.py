"""Tests that need a Debian tool the README's commands do not install (promtool, the
Pushgateway, chattr) skip, loudly, where it is missing; ``tox -e system`` sets
``GARMEXPORT_REQUIRE_SYSTEM_TOOLS`` and runs them after ``.ci/run`` has installed the tools,
so that there a missing tool fails the run instead of hiding it.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRED = bool(os.environ.get("GARMEXPORT_REQUIRE_SYSTEM_TOOLS"))


def unavailable(why: str) -> None:
    """Skip the calling test because ``why``; fail it where the tools are required."""
    if REQUIRED:
        pytest.fail(f"{why} (GARMEXPORT_REQUIRE_SYSTEM_TOOLS is set: `tox -e system` needs it)")
    pytest.skip(why)


def require_tool(name: str, package: str) -> str:
    """The path of ``name``; skips (or fails, see :data:`REQUIRED`) if it is not installed."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} not installed (Debian: apt-get install --no-install-recommends {package})")
    assert path is not None
    return path
