"""What the exporter's markers tell compaction: W per (feed, partition, type) and progress.

Reads ``_offsets/<source>+<topic>/<PPPPP>/m+*.json`` (intents and foreign names are
ignored) and merges them with the exporter's own rules (:mod:`garmexport.protocol.resume`): W of a
type is the maximum over markers (W only grows; a stale marker only lowers it, which makes
compaction fold less, never more). A type no marker names has no W here -- stricter than
the exporter's resume, which lets unnamed types inherit the seek position -- so its files
are never folded until a marker names it.

Time: ``low_event_ms`` when a marker carries it, else ``written_at_ms`` (see
:mod:`.closed`). A marker that does not parse is skipped with a warning: the exporter
publishes markers whole, so it is a foreign file.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from garmexport.compaction.closed import PartitionProgress
from garmexport.compaction.fs import FileOps
from garmexport.observe.logs import log_event
from garmexport.protocol.naming import OFFSETS_DIR, MarkerName
from garmexport.protocol.resume import Marker, merge_low

log = logging.getLogger(__name__)

PartitionKey = tuple[str, str, int]  # (source, topic, partition)


@dataclass(frozen=True)
class MarkerFacts:
    low: Mapping[PartitionKey, Mapping[str, int]]  # per partition: output -> W
    progress: Mapping[PartitionKey, PartitionProgress]

    def watermarks(self, output: str) -> dict[PartitionKey, int]:
        """W(output, partition) for every partition whose markers name ``output``."""
        return {k: low[output] for k, low in self.low.items() if output in low}


def merge_partition(docs: list[bytes]) -> tuple[dict[str, int], PartitionProgress] | None:
    """Merge the marker files of one partition; None when none parses (pure)."""
    markers: list[Marker] = []
    event_ms: list[int] = []
    for data in docs:
        try:
            marker = Marker.from_json(data)  # the exporter's own parser, the one there is
        except ValueError:
            continue
        markers.append(marker)
        if marker.low_event_ms is not None:
            event_ms.append(marker.low_event_ms)
    if not markers:
        return None
    progress = PartitionProgress(max(event_ms) if event_ms else None,
                                 max(m.written_at_ms for m in markers))
    return merge_low(markers), progress


def read_markers(fs: FileOps) -> MarkerFacts:
    """Read every marker under the root (a few small files per partition)."""
    low: dict[PartitionKey, dict[str, int]] = {}
    progress: dict[PartitionKey, PartitionProgress] = {}
    for feed in fs.list(OFFSETS_DIR):
        source, plus, topic = feed.name.partition("+")
        if not feed.is_dir or not plus:
            continue
        for part in fs.list(f"{OFFSETS_DIR}/{feed.name}"):
            if not (part.is_dir and part.name.isdigit()):
                continue
            base = f"{OFFSETS_DIR}/{feed.name}/{part.name}"
            docs = [fs.read(f"{base}/{e.name}") for e in fs.list(base)
                    if MarkerName.parse(e.name) is not None]
            merged = merge_partition(docs)
            if merged is None:
                if docs:
                    log_event(log, "compaction_marker_unreadable", level=logging.WARNING,
                              dir=base)
                continue
            key = (source, topic, int(part.name))
            low[key], progress[key] = merged
    return MarkerFacts(low, progress)
