"""Reading an output root as every tool reads it: the rows a reader sees, and where.

``verify``, ``repair`` (gaps) and ``repair duplicates``/``quarantine`` read the same
things in the same order: garmexport's visible files (:func:`garmexport.verify.count.
read_output`), then the Garmadon JVM exporter's files of our cluster tag
(:func:`garmexport.verify.jvm_files.read_jvm`), then the check that the root holds rows of
the configured topic at all (:func:`garmexport.verify.count.check_topic`, a ConfigError).
Progress goes to ``tick`` (a :class:`garmexport.cli.verify.Ticker`-like callable).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from garmexport.storage.base import Storage
from garmexport.verify.count import check_topic, read_output
from garmexport.verify.findings import Disagreement, Unreadable
from garmexport.verify.jvm_files import JvmRead, read_jvm

#: a progress line: ``tick(text)``, ``text(seconds since the start)`` giving the line
Tick = Callable[[Callable[[float], str]], None]


@dataclass(frozen=True)
class RootRead:
    #: where each (partition, offset) of the topic is held: one path per row
    held: dict[tuple[int, int], list[str]]
    #: files read, garmexport's and the JVM exporter's
    files: int
    jvm: JvmRead
    #: visible files that could not be read, garmexport's and the JVM exporter's
    unreadable: list[Unreadable]


def read_root(storage: Storage, topic: str, jvm_cluster: str, where: str, tick: Tick,
              disagreeing: list[Disagreement] | None = None) -> RootRead:
    """Read the root (see the module docstring); ``disagreeing``, when given, gets every
    file named like the exporter's whose name, footer and rows disagree. Raises
    ConfigError when no row of ``topic`` is held but files of other topics are."""
    def reading(done: int, total: int, rows: int) -> None:
        tick(lambda s: f"reading the output: {done}/{total} files, {rows} rows, {s:.0f} s")

    def reading_jvm(done: int, total: int, rows: int) -> None:
        tick(lambda s: f"reading the JVM exporter's files: {done}/{total}, {rows} rows, "
                       f"{s:.0f} s")

    unreadable: list[Unreadable] = []
    topics: Counter[str] = Counter()
    held, files = read_output(storage, topic, reading, disagreeing, unreadable, topics)
    jvm = read_jvm(storage, held, jvm_cluster, reading_jvm)
    check_topic(topic, held, topics, where)
    return RootRead(held, files + jvm.files, jvm, unreadable + jvm.unreadable)
