"""Reading what the Garmadon JVM exporter committed in an output root (the I/O half of
:mod:`garmexport.protocol.jvm_resume`).

Used only for a partition with no garmexport marker (recovery asks first). Cost, whatever
the number of partitions asked about: one listing of each type directory, one listing per
day directory, and one footer read per (type, partition, day), of the newest file of that
day only, addressed by the size the listing gave (on WebHDFS an OPEN and its redirect, no
status request); all are kept for the life of the scan, so a second assignment of a partition
reads nothing again. Footers are read on a few threads: on HDFS each is a NameNode call
and a DataNode read, and a two-year root holds 100,000 of them.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable

from garmexport.errors import ProtocolViolation
from garmexport.protocol.jvm_names import JvmFile, day_of_dir
from garmexport.protocol.jvm_resume import (
    JvmFound, Recent, Takeover, highest, newest_per_day, newest_sized, watch_since,
)
from garmexport.storage.base import Storage
from garmexport.storage.footer import column_max, read_footer

OFFSET_COLUMN = "kafka_offset"


class JvmScan:
    """The JVM exporter's committed offsets in one root, read lazily and once."""

    def __init__(self, storage: Storage, origins: Iterable[str], cluster: str = "",
                 threads: int = 8) -> None:
        self.storage = storage
        self.origins = tuple(origins)
        self.cluster = cluster
        self.threads = max(1, threads)
        self.footers_read = 0
        self._lock = threading.Lock()
        self._day_dirs: dict[str, list[tuple[str, str]]] = {}
        self._files: dict[tuple[str, str], dict[str, int]] = {}
        self._found: dict[int, dict[str, JvmFound]] = {}

    def _listing(self, origin: str, since: str = "") -> list[tuple[str, str, dict[str, int]]]:
        """(day, directory name, file name -> size) of the day directories of ``origin``
        from day ``since`` on."""
        if origin not in self._day_dirs:
            self._day_dirs[origin] = [(day, e.name) for e in self.storage.list(origin)
                                      if e.is_dir and (day := day_of_dir(e.name)) is not None]
        out = []
        for day, dirname in self._day_dirs[origin]:
            if day >= since:
                if (origin, dirname) not in self._files:
                    self._files[(origin, dirname)] = {
                        f.name: f.size for f in self.storage.list(f"{origin}/{dirname}")
                        if not f.is_dir}
                out.append((day, dirname, self._files[(origin, dirname)]))
        return out

    def _day_max(self, path: str, size: int) -> int | None:
        try:
            meta = read_footer(self.storage, path, size)
            with self._lock:
                self.footers_read += 1
            return column_max(meta, OFFSET_COLUMN)
        except FileNotFoundError:
            raise ProtocolViolation(
                f"{self.storage.uri}/{path}: a JVM exporter file vanished while garmexport "
                "read it; is the JVM exporter still running on this root? Stop it first "
                "(README, Taking over from the JVM exporter)") from None
        except ValueError as exc:
            raise ProtocolViolation(f"{self.storage.uri}/{path}: not a JVM exporter data "
                                    f"file garmexport can resume from ({exc}), or it changed "
                                    f"since it was listed at {size} bytes (is the JVM "
                                    "exporter still running?)") from None

    def found(self, partition: int) -> dict[str, JvmFound]:
        """Per origin, the highest offset the JVM exporter committed for ``partition`` and
        the file that holds it; origins it never wrote for the partition are absent."""
        if partition in self._found:
            return self._found[partition]
        wanted: list[tuple[str, str, str, int]] = []  # (origin, day, path, size listed)
        for origin in self.origins:
            newest = newest_per_day(self._listing(origin), partition, self.cluster)
            wanted += [(origin, day, f"{origin}/{d}/{f.name}", self._files[(origin, d)][f.name])
                       for day, (d, f) in sorted(newest.items())]
        with ThreadPoolExecutor(self.threads) as pool:
            maxima = list(pool.map(lambda w: self._day_max(w[2], w[3]), wanted))
        per_origin: dict[str, list[JvmFound]] = {}
        for (origin, day, path, _), top in zip(wanted, maxima):
            if top is not None:
                per_origin.setdefault(origin, []).append(JvmFound(top, day, path))
        result = {o: h for o, fs in per_origin.items() if (h := highest(fs)) is not None}
        self._found[partition] = result
        return result

    def partitions(self) -> list[int]:
        """The partitions that have a JVM file of our cluster tag (every day listed)."""
        found = {f.partition for o in self.origins for _, _, names in self._listing(o)
                 for n in names if (f := JvmFile.parse(n)) is not None and f.cluster == self.cluster}
        return sorted(found)

    def recent(self, partition: int, since: str) -> Recent:
        """Per origin, ``day -> (name, size)`` of the newest file of ``partition`` on each
        day from ``since`` on (one listing per type and per such day)."""
        out = {o: newest_sized(self._listing(o, since), partition, self.cluster, since)
               for o in self.origins}
        return {o: days for o, days in out.items() if days}

    def takeover(self, partition: int) -> Takeover | None:
        """What to record when ``partition`` is taken over (None: no JVM file of ours)."""
        found = self.found(partition)
        days = {day for o in self.origins
                for day in newest_per_day(self._listing(o), partition, self.cluster)}
        since = watch_since(days)
        if since is None:
            return None
        return Takeover(partition, since, found, self.recent(partition, since))


def holds_jvm_files(storage: Storage, origins: Iterable[str]) -> bool:
    """Whether the root holds a file named as the Garmadon JVM exporter names its data
    files, looked for in the oldest and the newest day directory of each type: a root taken
    over keeps the JVM's files in its oldest days, a root the JVM exporter still writes has
    them in its newest. At most three listings per type; asked only when a start's takeover
    could not run, to tell a deferred takeover from a root with nothing to take over."""
    for origin in origins:
        days = sorted((day, e.name) for e in storage.list(origin)
                      if e.is_dir and (day := day_of_dir(e.name)) is not None)
        for _, dirname in {days[0], days[-1]} if days else ():
            if any(not f.is_dir and JvmFile.parse(f.name) is not None
                   for f in storage.list(f"{origin}/{dirname}")):
                return True
    return False
