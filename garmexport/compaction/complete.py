"""Completeness markers: ``<output>/day=D/_COMPLETE`` once a closed day is fully compacted.

What it promises, when written: the day was closed (:mod:`.closed`: its end plus the
lateness delay is behind the slowest partition), every raw file of the day had been folded
(none was left above the watermark), and the compacted files it lists hold the day's
``rows`` rows -- every event of the day the exporter had committed by then.

A swap removes the marker before its commit point (:func:`.recover.commit_swap`): from
then until the run marks the day again, the day has no marker, crash or not. The run
writes it only when a fresh listing of the day shows exactly the files it names
(:func:`mark_if_complete`).

A late event after it (later than the lateness delay) lands as a new small raw file in the
day directory, as always. The marker is *kept*, not withdrawn (withdrawing would make the
exporter, which must not read day directories, responsible for it): a reader checks
:func:`is_current` -- the visible data files are exactly the ones listed -- and treats a
day whose marker is not current as "complete up to late data". The next compaction run
folds the late file and rewrites the marker with the new generation, files and rows.

The name starts with ``_``: Spark and Hive never read it as data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence

from garmexport.compaction.fs import FileOps
from garmexport.compaction.names import COMPLETE, CompactedName
from garmexport.compaction.plan import InputFile
from garmexport.compaction.scan import scan_day
from garmexport.compaction.swap import COMPLETE_STEP
from garmexport.protocol.naming import QUARANTINE_DIR, FileName, day_dir


def visible_data(names: Iterable[str]) -> list[str]:
    """Names of the day dir that readers see as data (ours: raw or compacted)."""
    return sorted(n for n in names if n[:1] not in ("_", ".") and (
                  CompactedName.parse(n) is not None
                  or (FileName.parse(n) is not None and FileName.parse(n).origin is None)))


def completion(output: str, day: str, files: Sequence[InputFile], names: Sequence[str],
               closed: bool, now_ms: int, lateness_s: float) -> dict[str, object] | None:
    """The marker document the day deserves now, or None when it is not complete (pure).

    Complete: closed, at least one file, and every visible data file compacted. Never the
    quarantine: its files are not compacted (a repair's rewrite of one is not the day).
    """
    if output == QUARANTINE_DIR:
        return None
    data = visible_data(names)
    compacted = [f for f in files if f.compacted]
    if not closed or not data or len(compacted) != len(data):
        return None
    return {"version": 1, "output": output, "day": day,
            "generation": max(CompactedName.parse(f.name).generation  # type: ignore[union-attr]
                              for f in compacted),
            "files": sorted(f.name for f in compacted), "rows": sum(f.rows for f in compacted),
            "written_at_ms": now_ms, "lateness_s": lateness_s}


def is_current(doc: dict[str, object], names: Iterable[str]) -> bool:
    """Whether the day still holds exactly the files the marker lists (no late file since)."""
    return sorted(doc.get("files", [])) == visible_data(names)  # type: ignore[call-overload]


def read_complete(fs: FileOps, output: str, day: str) -> dict[str, object] | None:
    try:
        return json.loads(fs.read(f"{day_dir(output, day)}/{COMPLETE}"))  # type: ignore[no-any-return]
    except (FileNotFoundError, ValueError):
        return None


def write_complete(fs: FileOps, output: str, day: str, doc: dict[str, object]) -> bool:
    """Write the marker unless the present one already says the same; True if written."""
    old = read_complete(fs, output, day)
    if old is not None and old.get("files") == doc["files"] and old.get("rows") == doc["rows"]:
        return False
    fs.write(f"{day_dir(output, day)}/{COMPLETE}", json.dumps(doc, indent=1).encode())
    return True


def mark_if_complete(fs: FileOps, output: str, day: str, now_ms: int, lateness_s: float,
                     crash: Callable[[str], None]) -> bool:
    """Write the day's marker if the (closed) day is fully compacted and a listing taken
    just before still shows exactly the files it names; True if written."""
    files, names, _ = scan_day(fs, output, day)
    doc = completion(output, day, files, names, True, now_ms, lateness_s)
    if doc is None:
        return False
    if not is_current(doc, [e.name for e in fs.list(day_dir(output, day)) if not e.is_dir]):
        return False  # a file was published since the scan: the next run marks the day
    crash(COMPLETE_STEP)
    return write_complete(fs, output, day, doc)
