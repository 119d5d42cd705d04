"""When markers are written for one partition, and which old files they let us delete.

A marker is written when it would say more than the last one (W moved, or a chain gained a
file reaching past W) and either a file was published since the last marker (at most every
``min_interval_s``) or the heartbeat period passed (DESIGN.md 4.4: idle types must not hold
the seek position back). After a marker is written, markers it dominates and intents it
covers are deleted, except the ``keep - 1`` newest of those markers
(``protocol.marker_keep``: 1 keeps only the new one): start-up then reads only a handful of
files. Keeping more is always safe, since a marker is a fact that stays true and start-up
merges them all; it costs one read per kept marker at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from garmexport.protocol.ledger import PartitionLedger
from garmexport.protocol.naming import IntentName, MarkerName
from garmexport.protocol.resume import Marker, dominates, intent_is_covered


@dataclass
class MarkerKeeper:
    min_interval_s: float
    heartbeat_interval_s: float
    markers: dict[MarkerName, Marker] = field(default_factory=dict)
    intents: set[IntentName] = field(default_factory=set)
    last_written_s: float = float("-inf")
    published_since: bool = False
    #: markers kept per partition after a write, the new one included (>= 1)
    keep: int = 1

    def published(self, intent: IntentName) -> None:
        self.intents.add(intent)
        self.published_since = True

    def due(self, ledger: PartitionLedger, now_s: float, force: bool = False) -> bool:
        """Whether a marker should be written now."""
        if not ledger.changed_since_written():
            return False
        elapsed = now_s - self.last_written_s
        if force:
            return True
        if self.published_since and elapsed >= self.min_interval_s:
            return True
        return elapsed >= self.heartbeat_interval_s

    def written(self, name: MarkerName, marker: Marker, now_s: float) -> tuple[list[MarkerName], list[IntentName]]:
        """Record a written marker; return the markers and intents that may now be deleted."""
        self.last_written_s = now_s
        self.published_since = False
        dominated = sorted(((m.written_at_ms, n) for n, m in self.markers.items()
                            if n != name and dominates(marker, m)), reverse=True)
        old = [n for _, n in dominated[max(0, self.keep - 1):]]
        covered = sorted(i for i in self.intents if intent_is_covered(marker, i))
        self.markers[name] = marker
        return old, covered

    def deleted(self, markers: list[MarkerName], intents: list[IntentName]) -> None:
        for n in markers:
            self.markers.pop(n, None)
        self.intents.difference_update(intents)
