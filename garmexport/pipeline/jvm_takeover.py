"""Writing a JVM takeover down: the takeover record, then the marker it amounts to.

A partition with no garmexport marker, on a root the Garmadon JVM exporter wrote, resumes
where that exporter stopped (:mod:`garmexport.pipeline.recovery`), which costs a footer
per (type, partition, day) of history. :func:`take_over` does that scan once, outside any
consumer group (``garmexport offsets set --from-jvm``, and ``garmexport run`` before it
joins: :func:`before_joining`), and writes what the assignment would otherwise compute each time until the first
marker: the takeover record (:func:`record_takeover`, the same one the assignment writes)
and the synthetic marker of :func:`garmexport.protocol.jvm_resume.takeover_marker`. A
later assignment then reads markers only.

Order, for crashes: the record first, the marker second. A crash between the two leaves
a partition without a marker, which the next attempt (or the assignment) takes over again
from the same files; the record is written exclusively, so the first one stays. A marker
without its record would lose the check that the JVM exporter stopped writing.

The marker is :func:`~garmexport.protocol.jvm_resume.takeover_marker`'s as it is, with no
event time and written at 0 ms: for compaction's closed-day rule (``compaction/closed.py``)
the partition then holds every day back until garmexport's first own marker says how far
it got, rather than claim the wall clock of this step as its progress.

The marker's W are the JVM exporter's, which the markers of every later owner can only
raise (the merge takes the maximum), so running this while an exporter already owns the
partition, or twice, changes no resume point.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from garmexport.observe.logs import log_event
from garmexport.pipeline.jvm_recovery import JvmScan
from garmexport.pipeline.publisher import write_marker
from garmexport.pipeline.recovery import read_partition_state
from garmexport.pipeline.router import exported_origins
from garmexport.protocol.jvm_resume import JvmFound, Takeover, takeover_marker
from garmexport.protocol.naming import TAKEOVER_FILE, MarkerName, partition_dir
from garmexport.settings.config import Config
from garmexport.storage.base import Storage
from garmexport.storage.open import open_output

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TakenOver:
    """What :func:`take_over` did for one partition."""

    partition: int
    #: "written", "dry run", "has markers" (nothing to do) or "no JVM file" (nothing to take)
    outcome: str
    seek: int | None = None
    found: dict[str, JvmFound] = dataclasses.field(default_factory=dict)
    footers_read: int = 0
    seconds: float = 0.0
    written: tuple[str, ...] = ()


def uncovered(storage: Storage, source: str, topic: str, partitions: Iterable[int]) -> list[int]:
    """The partitions with no marker (one listing each): the only ones a takeover concerns."""
    return [p for p in partitions
            if not any(MarkerName.parse(e.name) for e in storage.list(partition_dir(source, topic, p)))]


def record_takeover(storage: Storage, source: str, topic: str, partition: int,
                    jvm: JvmScan) -> tuple[Takeover | None, str | None]:
    """Write the takeover record of ``partition`` unless one exists (another owner's
    stays); return it and its path (None, None: no JVM file of ours for it)."""
    takeover = jvm.takeover(partition)
    if takeover is None:
        return None, None
    path = f"{partition_dir(source, topic, partition)}/{TAKEOVER_FILE}"
    with contextlib.suppress(FileExistsError):
        storage.put_exclusive(path, takeover.to_json())
    return takeover, path


class AtAssignment:
    """The takeover's part in a partition's start, for the coordinator
    (:mod:`garmexport.pipeline.coordinator`): the JVM exporter's offsets in this root
    (``[jvm] takeover``), read lazily and once per process (a partition with markers never
    reads them), and the record of what its files were at the takeover."""

    def __init__(self, storage: Storage, config: Config) -> None:
        self._storage, self._cfg = storage, config
        self._scan: JvmScan | None = None

    def scan(self) -> JvmScan | None:
        if self._scan is None and self._cfg.jvm.takeover:
            self._scan = JvmScan(self._storage, exported_origins(), self._cfg.jvm.cluster)
        return self._scan

    def record(self, p: int, jvm: JvmScan) -> None:
        """Write what the JVM exporter's files were at the takeover, before the first seek
        (recovery compares them at every later start)."""
        src = self._cfg.source
        takeover, _ = record_takeover(self._storage, src.cluster, src.topic, p, jvm)
        if takeover is None:
            return
        log_event(log, "jvm_takeover", partition=p, since=takeover.since,
                  lows={o: f.offset for o, f in sorted(takeover.found.items())})


def take_over(storage: Storage, source: str, topic: str, partitions: Iterable[int], jvm: JvmScan,
              *, dry_run: bool = False,
              progress: Callable[[TakenOver], None] = lambda _: None) -> list[TakenOver]:
    """Take every partition of ``partitions`` without a marker over from the JVM exporter.

    ``progress`` is called after each partition. Raises ProtocolViolation when a JVM file
    cannot be read or a recorded takeover sees the JVM exporter still writing, and
    StorageError when the store fails; partitions done before stay done."""
    done = []
    for p in sorted(partitions):
        started, footers = time.monotonic(), jvm.footers_read
        rec = read_partition_state(storage, source, topic, p, jvm)
        if rec.markers or not rec.jvm:
            outcome = "has markers" if rec.markers else "no JVM file"
            result = TakenOver(p, outcome, rec.state.seek() if rec.markers else None)
        else:
            marker = takeover_marker(p, rec.jvm)
            assert marker is not None  # rec.jvm is not empty
            written: tuple[str, ...] = ()
            if not dry_run:
                _, record = record_takeover(storage, source, topic, p, jvm)
                name = MarkerName(f"jvm-takeover-{uuid.uuid4().hex[:16]}", 1)
                written = (*([record] if record else []),
                           write_marker(storage, source, topic, name, marker))
            result = TakenOver(p, "dry run" if dry_run else "written", rec.state.seek(),
                               dict(rec.jvm), jvm.footers_read - footers,
                               time.monotonic() - started, written)
        progress(result)
        done.append(result)
    return done


def before_joining(config: Config, partitions: Iterable[int]) -> list[TakenOver]:
    """``garmexport run``'s takeover of the partitions of the topic that have no marker,
    before the consumer joins its group: the assignment callback then reads markers only,
    however long the JVM history (a scan inside it could outlast
    ``max.poll.interval.ms``). Costs one listing per partition when every partition has a
    marker (every start after the first); nothing with ``[jvm] takeover = false``."""
    if not config.jvm.takeover:
        return []
    src = config.source
    storage = open_output(config.output, f"takeover-{uuid.uuid4().hex[:8]}")
    try:
        todo = uncovered(storage, src.cluster, src.topic, partitions)
        if not todo:
            return []
        jvm = JvmScan(storage, exported_origins(), config.jvm.cluster)
        log_event(log, "jvm_takeover_scan", partitions=todo)
        started = time.monotonic()

        def progress(t: TakenOver) -> None:
            if t.found:
                log_event(log, "jvm_takeover", partition=t.partition, seek=t.seek,
                          footers=t.footers_read, seconds=round(t.seconds, 3),
                          lows={o: f.offset for o, f in sorted(t.found.items())})

        done = take_over(storage, src.cluster, src.topic, todo, jvm,
                         progress=progress)
        log_event(log, "jvm_takeover_scanned", partitions=len(todo),
                  taken=sum(1 for t in done if t.found), footers=jvm.footers_read,
                  seconds=round(time.monotonic() - started, 3))
        return done
    finally:
        storage.close()
