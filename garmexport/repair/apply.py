"""``garmexport repair --apply`` (gaps): publish a plan's fills, exactly once (I/O).

Each fill (the missing records of one (partition, origin) at or below its W,
:mod:`garmexport.repair.gaps`) goes through the exporter's own writer,
:class:`~garmexport.pipeline.origin_writer.OriginWriter`, as one batch: the same decoding,
quarantine, Parquet and footer facts, one file per (kind, day) chain split at
``writer.max_file_rows``, and the one publish (:func:`garmexport.pipeline.publisher.
publish_file`: intent, stage, exclusive publish; crash point ``publish`` after each file).
Its clock stands still, so no file is cut by age: the files, and so their names (the first
offset each holds), follow from the records alone. A rerun after a kill recomputes the
gaps from the output, which now holds what was published; two repairs of one plan
publish the same names, and the second gets PublishConflict instead of a duplicate.

Every record filled is at or below its origin's W, so the intent a publish leaves is
covered (DESIGN.md 4.6): it is deleted right after (a crash in between leaves it to the
exporters' GC, which ignores it meanwhile). With a metastore configured, each (dataset,
day) that received a file is registered as the exporter registers it
(:class:`~garmexport.hive.register.Registrar`: table made or grown, partitions added IF
NOT EXISTS).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from garmexport.errors import StorageError
from garmexport.hive.register import start_registrar
from garmexport.observe.metrics import Metrics
from garmexport.pipeline.messages import Batch, Published
from garmexport.pipeline.origin_writer import OriginWriter
from garmexport.protocol.naming import intent_path
from garmexport.protocol.resume import OriginState
from garmexport.settings.config import Config
from garmexport.storage.base import Storage
from garmexport.repair.gaps import Fill


@dataclass
class Applied:
    published: list[tuple[Fill, Published]] = field(default_factory=list)
    #: (fill, path another writer published first): that fill's rest was not written
    conflicts: list[tuple[Fill, str]] = field(default_factory=list)
    #: why the metastore could not register the repaired days ('' when it could)
    hive_problem: str = ""


def apply(config: Config, storage: Storage, fills: list[Fill],
          on_file: Callable[[Fill, Published], None] = lambda f, p: None) -> Applied:
    """Publish every fill; ``on_file`` is told each file as it is published. Raises
    StoreGaveUp when the store keeps failing (``storage.retry_attempts``)."""
    done = Applied()
    for fill in fills:
        writer = OriginWriter(config, storage, fill.origin, fill.partition, clock=lambda: 0.0)
        writer.reset(0, OriginState(-1, {}), -1)  # skip nothing: the plan chose the records
        b = fill.batch
        report = writer.handle(Batch(0, -1, b.offsets, tuple(b.values), b.kafka_ts, b.days,
                                     tuple(b.bad), b.nbytes))
        while True:
            for published in report.published:
                done.published.append((fill, published))
                _drop_intent(config, storage, fill, published)
                on_file(fill, published)
            if report.fenced_path is not None:
                done.conflicts.append((fill, report.fenced_path))
                break
            if not report.open_files:
                break
            if report.store_failing:
                time.sleep(config.storage.retry_initial_s)
            report = writer.flush()
    done.hive_problem = _register(config, done.published)
    return done


def _drop_intent(config: Config, storage: Storage, fill: Fill, published: Published) -> None:
    """Delete the covered intent of a published fill; a failure leaves it to the
    exporters' GC (it is at or below W: resume ignores it), not a reason to stop."""
    src = config.source
    try:
        storage.delete(intent_path(src.cluster, src.topic, fill.partition, published.intent))
    except StorageError:
        pass


def _register(config: Config, published: list[tuple[Fill, Published]]) -> str:
    """Register the (dataset, day) of every published file; what went wrong, or ''."""
    if not published:
        return ""
    registrar = start_registrar(config, Metrics.create(CollectorRegistry()))
    if registrar is None:
        return ""
    for fill, p in published:
        registrar.offer(fill.origin, [(p.kind, p.day)])
    registrar.stop(max(30.0, 3 * config.hive.timeout_s))
    return registrar.problem
