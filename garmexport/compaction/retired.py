"""Retired metastore views: recorded when the metastore leaves them, deleted after a grace.

A view (``<output>/day=D/_gG/``, :mod:`.swap`) is where the Hive partition pointed during
a swap. A query that listed its files then may still be reading them after the partition
moved back to the day directory, so the view is only *recorded* as retired (at the wall
time the metastore left it) in ``_compaction/_retired/<output>/day=D/gG.json``, and every
later run deletes the views retired more than ``grace_s`` ago (view first, then the
record, so a crash in between repeats the deletion). Nothing else reads a view: the
exporter's resume reads the files its intents name, fencing and ``verify`` list only the
day directory's files, compaction's scan skips directories.
"""

from __future__ import annotations

import json
import logging

from garmexport.compaction.fs import FileOps
from garmexport.compaction.names import RETIRED_DIR, parse_journal, retired_path
from garmexport.observe.logs import log_event
from garmexport.protocol.naming import parse_day_dir

log = logging.getLogger(__name__)


def record(fs: FileOps, output: str, day: str, generation: int, view: str, now_ms: int
           ) -> None:
    """Record ``view`` as retired at ``now_ms`` (keeps an earlier record: idempotent)."""
    path = retired_path(output, day, generation)
    if any(e.name == path.rpartition("/")[2] for e in fs.list(path.rpartition("/")[0])):
        return
    fs.write(path, json.dumps({"view": view, "retired_at_ms": now_ms}).encode())


def due(retired_at_ms: int, now_ms: int, grace_s: float) -> bool:
    """Whether a view retired at ``retired_at_ms`` may be deleted at ``now_ms`` (pure)."""
    return now_ms - retired_at_ms >= grace_s * 1000


def sweep(fs: FileOps, now_ms: int, grace_s: float) -> int:
    """Delete every view retired at least ``grace_s`` ago; the number deleted."""
    swept = 0
    for out in fs.list(RETIRED_DIR):
        for d in fs.list(f"{RETIRED_DIR}/{out.name}"):
            if parse_day_dir(d.name) is None:
                continue
            base = f"{RETIRED_DIR}/{out.name}/{d.name}"
            for e in fs.list(base):
                if e.is_dir or parse_journal(e.name) is None:
                    continue
                doc = json.loads(fs.read(f"{base}/{e.name}"))
                if not due(int(doc["retired_at_ms"]), now_ms, grace_s):
                    continue
                fs.delete_tree(str(doc["view"]))
                fs.delete(f"{base}/{e.name}")
                swept += 1
                log_event(log, "compaction_view_deleted", view=doc["view"],
                          retired_at_ms=doc["retired_at_ms"])
    return swept
