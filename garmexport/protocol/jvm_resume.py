"""Where garmexport resumes on a root the Garmadon JVM exporter wrote (pure rules).

The JVM exporter's own restart rule, which garmexport continues: for each (type T,
partition P), W_jvm(T, P) is the highest ``kafka_offset`` in the newest file of every day of
T for P (Parquet column statistics); P is sought to the minimum over types, and T skips
offsets ``<= W_jvm(T, P)``. garmexport reads every day present, not the JVM's two-day
backlog, so a long downtime does not re-read the topic.

That value is "the highest offset written", not garmexport's W ("everything up to it is
written", DESIGN.md 4.1): records of T below it that the JVM lost (its 4.2 hole: late
events of an older day open at a crash) are the JVM's gaps. They are not re-exported,
since garmexport cannot know which of the records below W_jvm the JVM holds without
reading every row; ``garmexport verify`` reports them. Every record of T above W_jvm was
never written by the JVM exporter (its files only ever hold offsets it consumed, and the
newest file of a day holds the day's highest), so taking over after it neither loses nor
duplicates what the JVM exporter left.

The takeover is expressed as a synthetic marker (:func:`takeover_marker`) merged like any
marker: W_jvm of each type the JVM wrote for P, no chains. Types it never wrote for P
start where the others allow (:meth:`PartitionState.low_of`), as a new type does. It is
used only while P has no garmexport marker: the first marker garmexport writes carries W
of every origin, at or above W_jvm (the ledger never lowers W below the resume state), so
from then on garmexport's markers say everything and no JVM footer is read again.

The JVM exporter must be stopped before garmexport takes over: its newest file of a day
is rewritten with appended rows at every commit, so while it runs, W_jvm moves under
garmexport's feet and both would write the records after it. garmexport cannot see that at
the takeover, but it records what it saw (:class:`Takeover`: per type, the newest file of
each of the last :data:`WATCH_DAYS` days and its size) and at every later start compares
that with the listing (:func:`still_writing`): a JVM file that grew, or a newer one,
refuses the start with the files named, rather than export records twice.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from garmexport.protocol.jvm_names import JvmFile
from garmexport.protocol.naming import day_dir
from garmexport.protocol.resume import Marker

#: Days, counting back from the newest JVM day of a partition, whose newest files a
#: takeover records: where a JVM exporter still running writes (today, and late events).
WATCH_DAYS = 3
Recent = Mapping[str, Mapping[str, tuple[str, int]]]  # origin -> day -> (file name, size)


@dataclass(frozen=True, order=True)
class JvmFound:
    """The highest ``kafka_offset`` the JVM exporter committed for one (type, partition)
    and the file (path relative to the root) whose footer gave it."""

    offset: int
    day: str
    path: str


def ours(f: JvmFile, partition: int, cluster: str) -> bool:
    """Whether ``f`` may set the offsets of ``partition`` for a cluster tagged ``cluster``
    (``""``: untagged). Offsets of two Kafka clusters are not comparable, so a file tagged
    with another cluster (or untagged when ours is tagged) never counts."""
    return f.partition == partition and f.cluster == cluster


def newest_per_day(
    days: Iterable[tuple[str, str, Iterable[str]]], partition: int, cluster: str,
) -> dict[str, tuple[str, JvmFile]]:
    """The newest file of ``partition`` in each day: ``day -> (directory name, file)``.

    ``days`` holds (day, directory name, names listed in it); a day may come in two
    directories (``day=D`` and the older bare ``D``), and the newest file over both wins.
    Days with no file of ours are left out.
    """
    best: dict[str, tuple[str, JvmFile]] = {}
    for day, dirname, names in days:
        for name in names:
            f = JvmFile.parse(name)
            if f is None or not ours(f, partition, cluster):
                continue
            if day not in best or f.order > best[day][1].order:
                best[day] = (dirname, f)
    return best


def highest(found: Iterable[JvmFound]) -> JvmFound | None:
    """The file with the highest offset (the later day on a tie), None for none."""
    return max(found, default=None)


def takeover_marker(partition: int, found: Mapping[str, JvmFound]) -> Marker | None:
    """The JVM exporter's committed state of ``partition`` as a marker to merge (None when
    it wrote nothing for it). ``found`` maps each origin to its highest :class:`JvmFound`."""
    if not found:
        return None
    low = {origin: f.offset for origin, f in found.items()}
    return Marker(partition, low, {}, processed=min(low.values()), written_at_ms=0)


def watch_since(days: Iterable[str]) -> str | None:
    """The first day a takeover watches: :data:`WATCH_DAYS` back from the newest of
    ``days`` (the days holding a JVM file of the partition); None when there are none."""
    newest = max(days, default=None)
    if newest is None:
        return None
    return (_dt.date.fromisoformat(newest) - _dt.timedelta(days=WATCH_DAYS - 1)).isoformat()


def newest_sized(days: Iterable[tuple[str, str, Mapping[str, int]]], partition: int,
                 cluster: str, since: str) -> dict[str, tuple[str, int]]:
    """``day -> (name, size)`` of the newest file of ours on each day from ``since`` on."""
    listed = [(d, dirname, sizes) for d, dirname, sizes in days if d >= since]
    sizes = {(dirname, n): size for _, dirname, names in listed for n, size in names.items()}
    return {day: (f.name, sizes[(dirname, f.name)])
            for day, (dirname, f) in newest_per_day(listed, partition, cluster).items()}


@dataclass(frozen=True)
class Takeover:
    """What garmexport saw of the JVM exporter's files when it took ``partition`` over."""

    partition: int
    since: str
    found: Mapping[str, JvmFound] = field(default_factory=dict)
    recent: Recent = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps({
            "version": 1, "partition": self.partition, "since": self.since,
            "found": {o: [f.offset, f.day, f.path] for o, f in sorted(self.found.items())},
            "recent": {o: {d: list(v) for d, v in sorted(days.items())}
                       for o, days in sorted(self.recent.items()) if days},
        }, separators=(",", ":")).encode()

    @staticmethod
    def from_json(data: bytes) -> Takeover:
        """Raises ValueError when ``data`` is not a takeover record."""
        try:
            doc = json.loads(data)
            return Takeover(
                int(doc["partition"]), str(doc["since"]),
                {o: JvmFound(int(v[0]), str(v[1]), str(v[2])) for o, v in doc["found"].items()},
                {o: {d: (str(v[0]), int(v[1])) for d, v in days.items()}
                 for o, days in doc["recent"].items()})
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a JVM takeover record: {exc!r}") from None


def still_writing(takeover: Takeover, now: Recent) -> list[str]:
    """What changed among the JVM files a takeover watched (``now``: the same view read
    again, from ``takeover.since`` on), one line per file; empty when nothing did."""
    changes = []
    for origin in sorted(set(takeover.recent) | set(now)):
        was, is_ = takeover.recent.get(origin, {}), now.get(origin, {})
        for day in sorted(set(was) | set(is_)):
            before, after = was.get(day), is_.get(day)
            if after is None or before == after:
                continue  # gone (compacted, deleted by hand) is not writing
            what = "new file" if before is None or before[0] != after[0] else \
                f"size {before[1]} -> {after[1]}"
            changes.append(f"{day_dir(origin, day)}/{after[0]} ({what})")
    return changes
