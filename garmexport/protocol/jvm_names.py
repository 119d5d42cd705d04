"""Names the Garmadon JVM HDFS exporter left in an output root, parsed (pure).

garmexport can take over a root that the JVM exporter (``readers/hdfs``) wrote: the same
``<type>/`` directories, with day directories and files named its way
(docs/jvm-takeover.md):

- day directories ``day=YYYY-MM-DD``, and ``YYYY-MM-DD`` before September 2019 (a
  ``YYYY-MM-DD`` directory also holds the hidden ``.<partition>.done`` checkpoints);
- files ``<p>.index=<n>`` and ``<p>.cluster=<c>.index=<n>``; before April 2019 also
  ``<p>.<offset>``, ``<p>.cluster=<c>.<offset>`` and ``<p>[.cluster=<c>].index=<n>.<offset>``.

Invariants:

- Parsing is total: a garmexport name (``<source>+<topic>+...parquet``), a hidden file
  (``.``/``_``), a ``.crc`` or anything else gives ``None``, never an exception.
- Within one (type, day, partition) the JVM exporter wrote files one after the other in
  offset order, so the file with the greatest :attr:`JvmFile.order` is the newest, and the
  only one whose footer can hold the day's highest ``kafka_offset``. An ``index=`` name
  ranks above an old ``<p>.<offset>`` name (index names replaced those).
- ``cluster`` is ``""`` for an untagged name. Which tag counts as ours is the caller's
  choice (:func:`garmexport.protocol.jvm_resume.ours`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DAY = r"(\d{4}-\d{2}-\d{2})"
_DAY_DIR_RE = re.compile(rf"^(?:day=)?{_DAY}$", re.ASCII)
# <p> [.cluster=<c>] [.index=<n>] [.<offset>]; a cluster label never holds a '.'-free
# "index=" so the greedy-free class below stops at the next dot.
_FILE_RE = re.compile(
    r"^(\d+)(?:\.cluster=([A-Za-z0-9_-]+))?(?:\.index=(\d+))?(?:\.(\d+))?$", re.ASCII)


def day_of_dir(name: str) -> str | None:
    """``YYYY-MM-DD`` of a JVM day directory name (``day=`` or bare), else None."""
    m = _DAY_DIR_RE.match(name)
    return m.group(1) if m else None


@dataclass(frozen=True, order=True)
class JvmFile:
    """One JVM exporter data file name, parsed."""

    partition: int
    cluster: str
    index: int | None
    offset: int | None
    name: str

    @property
    def order(self) -> tuple[int, int, int]:
        """Sort key of the files of one (type, day, partition): greatest is newest."""
        return (0 if self.index is None else 1, self.index or 0,
                -1 if self.offset is None else self.offset)

    @staticmethod
    def parse(name: str) -> JvmFile | None:
        """The parsed name, or None when ``name`` is not a JVM exporter data file."""
        m = _FILE_RE.match(name)
        if m is None or (m.group(3) is None and m.group(4) is None):
            return None  # a bare "<p>" is no name the JVM exporter ever committed
        partition, cluster, index, offset = m.groups()
        return JvmFile(int(partition), cluster or "", None if index is None else int(index),
                       None if offset is None else int(offset), name)
