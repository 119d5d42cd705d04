"""Running the exporter in this process: the actor system, the main loop, the exit code.

Exit codes: 0 after a clean stop (every open file published, final markers written),
1 after a failure (one ``failure`` line says what; Marathon restarts the task and the
protocol makes that safe), 2 after a configuration error found at start (a metrics port
already in use), 143 on a second SIGTERM (130 on a second SIGINT) during the stop.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from thespian.actors import ActorSystem

from garmexport.process import stop_signal
from garmexport.process.instance_id import new_instance_id
from garmexport.settings.config import Config
from garmexport.actors.exporter_actor import ExporterActor
from garmexport.observe.logs import log_event
from garmexport.actors.start_messages import StartExport
from garmexport.pipeline.messages import ExportStopped, StopExport
from garmexport.pipeline.unfinished import Unfinished

if TYPE_CHECKING:
    from garmexport.kafka.source import KafkaSource

log = logging.getLogger(__name__)


#: CPython's default collector thresholds are (700, 10, 10). The export loop allocates
#: millions of short-lived containers (Kafka records, routed lists, batches) and leaves no
#: reference cycles (tests/pipeline/test_no_cycles.py), yet the defaults ran the collector
#: about 1,500 times per million events, each pass walking the large record lists it
#: found in the young generations: 0.5 to 0.76 s of about 10 CPU-seconds. With these
#: thresholds it runs a few times per million events.
GC_THRESHOLDS = (50_000, 20, 20)


def use_system_allocator() -> None:
    """Arrow allocates through the C library's malloc, not its bundled mimalloc.

    With the writers on several threads (``actors.cores``), mimalloc keeps freed pages per
    thread: the 1M-event catch-up peaked at 587-613 MB with it and at 559-560 MB with the
    C library's allocator, at the same speed (5.76/5.82 s and 6.24/6.19 s, paired runs,
    DESIGN.md 9.7). An explicit ``ARROW_DEFAULT_MEMORY_POOL`` is left as it is."""
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        import pyarrow as pa  # noqa: PLC0415 - loaded by the writers anyway

        pa.set_memory_pool(pa.system_memory_pool())


def tune_gc() -> None:
    """Collect less often, and never scan what start-up loaded (modules, descriptors)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def write_stop_report(path: str, fields: dict[str, object]) -> None:
    """``fields`` as JSON at ``path``, whole or not at all (written aside, then renamed)."""
    aside = f"{path}.part"
    with open(aside, "w", encoding="utf-8") as out:
        json.dump(fields, out)
    os.replace(aside, path)


def actor_system() -> ActorSystem:
    """A fresh in-process actor system; logging stays as :mod:`garmexport.observe.logs` set it."""
    return ActorSystem("simpleSystemBase", logDefs=False, transientUnique=True)


def run_export(config: Config, instance: str | None = None,
               source: KafkaSource | None = None, stop_report: str | None = None) -> int:
    """Export until stopped (signal) or failed; return the process exit code.

    ``source``: a KafkaSource subscribed early (see :class:`garmexport.kafka.source.KafkaSource`),
    or None to subscribe when the reader starts. ``stop_report``: a file that a forced stop
    writes its ``stop_forced`` fields to (JSON), for a reader's supervisor to sum up.
    """
    instance = instance or new_instance_id()
    unfinished = Unfinished()

    def forced(why: str, code: int) -> None:
        fields = {"why": why, "code": code, **unfinished.fields()}
        log_event(log, "stop_forced", level=logging.WARNING, **fields)
        if stop_report:
            write_stop_report(stop_report, fields)

    stop_signal.install(config.protocol.shutdown_timeout_s + 10.0, forced)
    log_event(log, "starting", instance=instance, topic=config.source.topic,
              root=config.output.root, base=config.actors.system_base)
    started = time.monotonic()
    use_system_allocator()
    tune_gc()
    asys = actor_system()
    try:
        top = asys.createActor(ExporterActor)
        asys.tell(top, StartExport(config, instance, source, unfinished))
        stop_sent = False
        while True:
            msg = asys.listen(timedelta(seconds=0.5))
            if isinstance(msg, ExportStopped):
                log_event(log, "stopped", code=msg.exit_code, reason=msg.reason,
                          seconds=round(time.monotonic() - started, 3))
                return msg.exit_code
            if stop_signal.requested() and not stop_sent:
                stop_sent = True
                asys.tell(top, StopExport(stop_signal.why()))
    finally:
        _quietly("actor_system", asys.shutdown)
        if source is not None:  # the reader may not have got to it
            _quietly("kafka_source", source.close)


def _quietly(what: str, close: object) -> None:
    """Shutting down never crashes: the exit code is decided; log what failed instead."""
    try:
        close()  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the exit code stands
        log_event(log, "close_failed", level=logging.WARNING, what=what,
                  error=f"{type(exc).__name__}: {exc}")
