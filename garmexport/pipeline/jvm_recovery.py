"""Reading what the Garmadon JVM exporter committed in an output root (the I/O half of
:mod:`garmexport.protocol.jvm_resume`).

Used only for a partition with no garmexport marker (recovery asks first). Cost, whatever
the number of partitions asked about: one listing of each type directory, one listing per
day directory, and one footer read per (type, partition, day), of the newest file of that
day only; all are kept for the life of the scan, so a second assignment of a partition
reads nothing again. Footers are read on a few threads: on HDFS each is a NameNode call
and a DataNode read, and a two-year root holds 100,000 of them.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable

from garmexport.errors import ProtocolViolation
from garmexport.protocol.jvm_names import day_of_dir
from garmexport.protocol.jvm_resume import JvmFound, highest, newest_per_day
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
        self._days: dict[str, list[tuple[str, str, list[str]]]] = {}
        self._found: dict[int, dict[str, JvmFound]] = {}

    def _listing(self, origin: str) -> list[tuple[str, str, list[str]]]:
        """(day, directory name, file names) of every day directory of ``origin``."""
        if origin not in self._days:
            out = []
            for e in self.storage.list(origin):
                day = day_of_dir(e.name) if e.is_dir else None
                if day is not None:
                    names = [f.name for f in self.storage.list(f"{origin}/{e.name}")
                             if not f.is_dir]
                    out.append((day, e.name, names))
            self._days[origin] = out
        return self._days[origin]

    def _day_max(self, path: str) -> int | None:
        try:
            meta = read_footer(self.storage, path)
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
                                    f"file garmexport can resume from: {exc}") from None

    def found(self, partition: int) -> dict[str, JvmFound]:
        """Per origin, the highest offset the JVM exporter committed for ``partition`` and
        the file that holds it; origins it never wrote for the partition are absent."""
        if partition in self._found:
            return self._found[partition]
        wanted: list[tuple[str, str, str]] = []  # (origin, day, path)
        for origin in self.origins:
            newest = newest_per_day(self._listing(origin), partition, self.cluster)
            wanted += [(origin, day, f"{origin}/{d}/{f.name}")
                       for day, (d, f) in sorted(newest.items())]
        with ThreadPoolExecutor(self.threads) as pool:
            maxima = list(pool.map(lambda w: self._day_max(w[2]), wanted))
        per_origin: dict[str, list[JvmFound]] = {}
        for (origin, day, path), top in zip(wanted, maxima):
            if top is not None:
                per_origin.setdefault(origin, []).append(JvmFound(top, day, path))
        result = {o: h for o, fs in per_origin.items() if (h := highest(fs)) is not None}
        self._found[partition] = result
        return result
