"""Restart as a pure function: from what the output holds to where to resume.

Vocabulary (DESIGN.md 2 and 4.5):

- an *origin* is a writer of one partition: an exported type's output name, or
  ``_frame`` for records that could not be routed to a type;
- a *chain* is (origin, kind, day), kind ``d`` for data and ``q`` for quarantine; the files
  of a chain cover consecutive stretches of that chain's sub-stream, in offset order;
- ``low[origin]`` is the low watermark W: every event of that origin in this partition
  with offset <= W is in a published file;
- ``last[chain]`` is the last offset in the chain's published files, kept only where it
  is above W (a few days at most).

Given the markers of a partition and the footers of the files its intents name, the
resume state is exact:

- seek to ``min(low) + 1`` (no marker at all: the configured first-run position): the
  protocol's one off-by-one, W inclusive and a Kafka seek exclusive (DESIGN.md 4.5),
  :func:`seek_after`;
- skip an event if ``offset <= low[origin]`` or ``offset <= last[its chain]``: the one skip
  rule, :meth:`OriginState.skip_bound`. The router applies its first half on the frame head
  (W covers every chain of the origin); the writer the whole of it once a record is decoded
  (only then is it known whether it joins a data or a quarantine chain).

The resume value has three forms, each for one reader of it: a :class:`Marker` is one file's
content, a :class:`PartitionState` the merge of a partition's markers and intents, and an
:class:`OriginState` one origin's slice of it, which the router and the origin's writer
skip by (the writer's open files advance it as they publish).

Merging takes the maximum of every claim, because every claim in a marker is a fact that
stays true (W only grows; a chain's last committed offset only grows). Origins that no
marker names (a type added by a newer version) do not pull the seek position back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from garmexport.protocol.naming import IntentName


@dataclass(frozen=True, order=True)
class Chain:
    origin: str
    kind: str
    day: str


@dataclass(frozen=True)
class Marker:
    """The content of one marker file of one partition."""

    partition: int
    low: Mapping[str, int]
    last: Mapping[Chain, int]
    processed: int
    written_at_ms: int
    #: Kafka timestamp (ms) of the last record routed when the marker was written: the
    #: partition's progress in time, for the closed-day rule of compaction and for the lag
    #: in seconds of a new owner before its first poll (lag_time). W trails it by at most
    #: the age of the oldest open file.
    low_event_ms: int | None = None

    def to_json(self) -> bytes:
        days: dict[str, dict[str, dict[str, int]]] = {}
        for chain, offset in sorted(self.last.items()):
            days.setdefault(chain.origin, {}).setdefault(chain.kind, {})[chain.day] = offset
        doc = {
            "version": 1,
            "partition": self.partition,
            "low": dict(sorted(self.low.items())),
            "days": days,
            "processed": self.processed,
            "written_at_ms": self.written_at_ms,
        }
        if self.low_event_ms is not None:
            doc["low_event_ms"] = self.low_event_ms
        return json.dumps(doc, separators=(",", ":")).encode()

    @staticmethod
    def from_json(data: bytes) -> Marker:
        """Parse a marker; raises ValueError (with the reason) when it is not one."""
        try:
            doc = json.loads(data)
            last = {
                Chain(origin, kind, day): int(offset)
                for origin, kinds in doc["days"].items()
                for kind, days in kinds.items()
                for day, offset in days.items()
            }
            return Marker(
                partition=int(doc["partition"]),
                low={str(k): int(v) for k, v in doc["low"].items()},
                last=last,
                processed=int(doc["processed"]),
                written_at_ms=int(doc["written_at_ms"]),
                low_event_ms=None if doc.get("low_event_ms") is None else int(doc["low_event_ms"]),
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a garmexport marker: {exc!r}") from None


@dataclass(frozen=True)
class PartitionState:
    """What is committed in one partition, as far as resuming needs to know."""

    partition: int
    low: Mapping[str, int] = field(default_factory=dict)
    last: Mapping[Chain, int] = field(default_factory=dict)
    has_marker: bool = False

    def seek(self) -> int | None:
        """Offset to resume at, W + 1 (DESIGN.md 4.5), or None when no marker exists (use
        the configured start)."""
        if not self.has_marker or not self.low:
            return None
        return seek_after(self.low)

    def low_of(self, origin: str) -> int:
        """W of ``origin``; an origin no marker names gets the partition's seek position - 1
        (a type added by a newer version starts where the others resume)."""
        if origin in self.low:
            return self.low[origin]
        seek = self.seek()
        return -1 if seek is None else seek - 1

    def for_origin(self, origin: str) -> OriginState:
        return OriginState(
            low=self.low_of(origin),
            last={(c.kind, c.day): o for c, o in self.last.items() if c.origin == origin},
        )


@dataclass(frozen=True)
class OriginState:
    """The slice of a PartitionState one writer needs: its W and its chains' last offsets."""

    low: int
    last: Mapping[tuple[str, str], int]

    def skip_bound(self, kind: str, day: str) -> int:
        """The skip rule: events of chain (kind, day) at or below this offset are published."""
        return max(self.low, self.last.get((kind, day), -1))

    def published(self, kind: str, day: str, last_offset: int) -> OriginState:
        """The state once a file of chain (kind, day) ending at ``last_offset`` is published."""
        return OriginState(self.low, {**self.last, (kind, day): last_offset})


def seek_after(lows: Mapping[str, int]) -> int:
    """Where to resume a partition whose origins have these W: min over origins of W, + 1."""
    return min(lows.values()) + 1


def intents_to_check(markers: Iterable[Marker], intents: Iterable[IntentName]) -> list[IntentName]:
    """The intents whose files may hold commits that no marker knows of.

    An intent at or below its origin's merged W is already reflected in a marker: W can
    only pass the intent's first offset once that file is committed, and the marker that
    says so records the file's chain whenever the file reaches past W.
    """
    low = merge_low(markers)
    return sorted(i for i in intents if i.first_offset > low.get(i.origin, -1))


def merge_low(markers: Iterable[Marker]) -> dict[str, int]:
    low: dict[str, int] = {}
    for m in markers:
        for origin, w in m.low.items():
            low[origin] = max(w, low.get(origin, w))
    return low


def merge_state(
    partition: int,
    markers: Iterable[Marker],
    published: Iterable[tuple[IntentName, int]] = (),
) -> PartitionState:
    """Merge markers and the (intent, last offset) of intents whose file exists.

    ``published`` holds the intents from :func:`intents_to_check` whose data file was
    found, each with the last offset read from that file's footer.
    """
    markers = list(markers)
    low = merge_low(markers)
    last: dict[Chain, int] = {}
    for m in markers:
        for chain, offset in m.last.items():
            last[chain] = max(offset, last.get(chain, offset))
    for intent, offset in published:
        chain = Chain(intent.origin, intent.kind, intent.day)
        last[chain] = max(offset, last.get(chain, offset))
    pruned = {c: o for c, o in last.items() if o > low.get(c.origin, -1)}
    return PartitionState(partition, low, pruned, has_marker=bool(markers))


def dominates(new: Marker, old: Marker) -> bool:
    """Whether ``old`` may be deleted once ``new`` is written: it says nothing more.

    Every W of ``old`` is at most ``new``'s, and every chain offset of ``old`` is covered
    by ``new``'s W of that origin or by ``new``'s own offset for the chain.
    """
    for origin, w in old.low.items():
        if w > new.low.get(origin, -1):
            return False
    for chain, offset in old.last.items():
        if offset > new.low.get(chain.origin, -1) and offset > new.last.get(chain, -1):
            return False
    return True


def intent_is_covered(marker: Marker, intent: IntentName) -> bool:
    """Whether an intent may be deleted once ``marker`` is written (see intents_to_check)."""
    return intent.first_offset <= marker.low.get(intent.origin, -1)
