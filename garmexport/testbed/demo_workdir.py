"""The demo's working directory: made by the demo, emptied only when the demo made it.

``garmexport demo --workdir DIR`` starts from an empty directory. It creates DIR (or takes
an existing empty one) and writes :data:`MARKER` in it first thing. On a later run it
empties DIR only if the marker is there; a non-empty DIR without the marker (a user's
directory, given by mistake) is refused and nothing in it is touched. DIR itself is never
deleted, only what the demo put in it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from garmexport.errors import ConfigError

MARKER = ".garmexport-demo"


def prepare(work: Path) -> None:
    """Make ``work`` an empty directory holding only the demo's marker.

    Raises ConfigError (nothing deleted) when ``work`` is not a directory, or is a
    non-empty directory without the marker.
    """
    if work.exists() and not work.is_dir():
        raise ConfigError(f"--workdir {work} is not a directory: choose another path")
    if work.is_dir():
        entries = list(work.iterdir())
        if entries and not (work / MARKER).is_file():
            raise ConfigError(
                f"--workdir {work} is not empty and was not made by the demo (no {MARKER} "
                "in it): choose a new or empty directory, or empty this one yourself; nothing was "
                "deleted")
        for entry in entries:
            if entry.name == MARKER:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    work.mkdir(parents=True, exist_ok=True)
    (work / MARKER).write_text("made by garmexport demo: the demo empties this directory "
                               "when it runs again\n")
