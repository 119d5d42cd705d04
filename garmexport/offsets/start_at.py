"""``garmexport offsets set``: plan and write markers so that a deployment starts at given
offsets.

The exporter resumes a partition at the seek position (DESIGN.md 4.5), merging markers by the
maximum of every claim (:mod:`garmexport.protocol.resume`). To start a partition at offset O, a
marker with W = O - 1 for every origin is written (:func:`plan_move`, pure; :func:`apply`,
the I/O):

- **forward** (every merged W is at most O - 1): the new marker alone is enough, the
  maximum wins. Chain entries of the old state that reach past O - 1 are copied into it
  (they are facts, and the skip rule keeps using them), so older markers say nothing more
  and the exporter's garbage collection removes them. Offsets between the old seek and O
  are never exported: the plan counts them and the command warns.
- **backwards** (some origin's merged W is above O - 1, i.e. records from O on are already
  committed for that origin) is refused unless forced. Forced, the new marker is written
  first and then every other marker and every intent of the partition is deleted (a crash
  in between leaves the old position, and the command can be run again). Files already
  published at or above O are not touched: the exporter writes them again, and a file of
  the same name makes it report a publish conflict; remove those files before.

The exporter must be stopped while markers are set: a running owner writes its own
markers, and the maximum of its W and ours wins. :func:`first_offset_at_or_after` finds
the offset of a timestamp by checking a broker's answer or binary search over single
records (the broker I/O is passed in, see ``cli_offsets``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from garmexport.protocol.naming import IntentName, MarkerName, partition_dir
from garmexport.pipeline.publisher import write_marker
from garmexport.pipeline.recovery import Recovered
from garmexport.protocol.resume import Marker
from garmexport.storage.base import Storage

#: offset -> (offset, Kafka timestamp ms) of the first record at or after it; None past the end
Probe = Callable[[int], "tuple[int, int] | None"]


@dataclass(frozen=True)
class Move:
    """What ``offsets set`` does to one partition. ``refused`` set: nothing is written."""

    partition: int
    old_seek: int | None      # from the markers; None: no marker yet
    old_position: int | None  # old_seek, else where a first run would start (None: unknown)
    new_seek: int
    marker: Marker | None     # None when refused or unchanged
    delete_markers: tuple[MarkerName, ...] = ()
    delete_intents: tuple[IntentName, ...] = ()
    behind: tuple[str, ...] = ()  # origins whose committed W is above new_seek - 1
    skipped: int = 0              # offsets in [old_position, new_seek) that will not be exported
    refused: str | None = None
    warnings: tuple[str, ...] = field(default=())

    @property
    def backwards(self) -> bool:
        return bool(self.behind)


def plan_move(partition: int, offset: int, recovered: Recovered | None, origins: Iterable[str],
              *, now_ms: int, force: bool = False, end: int | None = None,
              first_run_start: int | None = None) -> Move:
    """Plan the start of ``partition`` at ``offset`` (the first offset the exporter reads).

    ``origins`` are those the router knows (``router.ORIGINS``); origins that only the old
    markers name get the same W. ``end`` (last offset + 1, None: unknown) refuses offsets
    past the end unless forced. Raises ValueError for a negative offset.
    """
    if offset < 0:
        raise ValueError(f"partition {partition}: offset {offset} is negative")
    state = recovered.state if recovered is not None else None
    old_seek = state.seek() if state is not None else None
    old_position = old_seek if old_seek is not None else first_run_start
    low = dict(state.low) if state is not None else {}
    w = offset - 1
    behind = tuple(sorted(o for o, v in low.items() if v > w))
    skipped = max(0, offset - old_position) if old_position is not None and not behind else 0
    base = dict(partition=partition, old_seek=old_seek, old_position=old_position,
                new_seek=offset, behind=behind, skipped=skipped)
    if end is not None and offset > end and not force:
        return Move(**base, marker=None,
                    refused=f"offset {offset} is past the end of the partition ({end}); "
                            "--force to set it anyway")
    if behind and not force:
        return Move(**base, marker=None, refused=(
            f"moving back over committed data: {len(behind)} origin(s) have W above {w} "
            f"(highest W {max(low.values())}; any offset >= {max(low.values()) + 1} only moves "
            "forward); --force deletes this partition's markers and intents and re-exports"))
    if not behind and old_seek == offset and all(v == w for v in low.values()):
        return Move(**base, marker=None)  # already there
    names = set(low) | set(origins)
    keep = state is not None and not behind
    last = {c: o for c, o in state.last.items() if o > w} if keep else {}  # type: ignore[union-attr]
    marker = Marker(partition=partition, low={o: w for o in sorted(names)}, last=last,
                    processed=w, written_at_ms=now_ms)
    warnings = []
    if skipped:
        warnings.append(f"skips {skipped} offsets ({old_position}..{offset - 1}): "
                        "those records will not be exported")
    if behind:
        warnings.append(f"re-exports records from offset {offset} for {', '.join(behind)}: "
                        "files already published at or above it must be removed first")
    if end is not None and offset > end:
        warnings.append(f"offset {offset} is past the end of the partition ({end})")
    deletes = (tuple(sorted(recovered.markers)), tuple(recovered.intents)) \
        if behind and recovered is not None else ((), ())
    return Move(**base, marker=marker, delete_markers=deletes[0], delete_intents=deletes[1],
                warnings=tuple(warnings))


def new_marker_name() -> MarkerName:
    """A marker name no exporter instance uses: ``m+offsets-set-<uuid>+000000000001.json``."""
    return MarkerName(f"offsets-set-{uuid.uuid4().hex[:16]}", 1)


def apply(storage: Storage, cluster: str, topic: str, move: Move,
          name: MarkerName | None = None) -> list[str]:
    """Write the move's marker, then delete what it replaces; return the paths touched
    (written first). Does nothing for a refused or unchanged move. Raises StorageError."""
    if move.marker is None:
        return []
    name = name or new_marker_name()
    done = [write_marker(storage, cluster, topic, name, move.marker)]
    pdir = partition_dir(cluster, topic, move.partition)
    for old in [m.format() for m in move.delete_markers] + [i.format() for i in move.delete_intents]:
        storage.delete(f"{pdir}/{old}")
        done.append(f"{pdir}/{old}")
    return done


def first_offset_at_or_after(timestamp_ms: int, start: int, end: int, probe: Probe,
                             hint: int | None = None) -> tuple[int, int, bool]:
    """The first offset in [start, end] whose record's timestamp is >= ``timestamp_ms``
    (``end`` when none is); returns (offset, probes used, whether ``hint`` was trusted).

    ``hint`` (a broker's offsets_for_times answer) is accepted only if the records around
    it prove it: its record is at or after the time and the record before it is earlier.
    Otherwise a binary search over offsets, one probe per step, which assumes timestamps
    that do not decrease with the offset (CreateTime set by well-behaved producers, or
    LogAppendTime); with out-of-order timestamps it returns *a* boundary offset o with
    ts(o - 1) < time <= ts(o). Offsets without a record (compaction, transaction markers)
    are handled: a probe returns the next record.
    """
    probes = 0

    def at(offset: int) -> tuple[int, int] | None:
        nonlocal probes
        probes += 1
        return probe(offset)

    if hint is not None and start <= hint <= end:
        here = at(hint) if hint < end else None
        ok_here = hint == end or (here is not None and here[0] == hint and here[1] >= timestamp_ms)
        if ok_here and hint == start:
            return hint, probes, True
        before = at(hint - 1) if ok_here else None
        if ok_here and before is not None and before[0] == hint - 1 and before[1] < timestamp_ms:
            return hint, probes, True
    lo, hi = start, end
    while lo < hi:  # records before lo are earlier; the first record at or after hi is not
        mid = (lo + hi) // 2
        found = at(mid)
        if found is None or found[1] >= timestamp_ms:
            hi = mid
        else:
            lo = min(found[0] + 1, hi)  # past hi only if timestamps go backwards
    return lo, probes, False
