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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from garmexport.protocol.jvm_names import JvmFile
from garmexport.protocol.resume import Marker


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
