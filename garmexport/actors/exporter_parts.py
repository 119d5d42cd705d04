"""The exporter process's composition root: every long-lived part, built once, here.

:func:`assemble` builds, in this order: the metrics on a fresh registry, health and its HTTP
server (``/metrics``, ``/health/*``), the output store (after collecting the temp files of
dead processes), the back-off that every writer of that store shares, the executor
that runs the writers' work (``actors.cores``), the Hive partition registrar (when a
metastore is configured), the :class:`~garmexport.pipeline.coordinator.Coordinator` that tells it what
was published, and the Kafka source bound to the reader. Nothing else
builds them, and nothing is kept in process-global registries: the reader actor calls
:func:`assemble` when it starts and holds the parts; writer actors get the store, the
back-off and the executor as one :class:`~garmexport.pipeline.writer_start.WriterSite` in their
``StartWriter``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from garmexport.pipeline.writer_work import SharedBackoff, WriterWork
from garmexport.pipeline.writer_start import WriterSite
from garmexport.settings.config import Config
from garmexport.storage.counted import CountedStorage
from garmexport.storage.open import open_output
from garmexport.observe.health import (Health, HealthServer, listen_refused, serve,
                                       write_port_file)
from garmexport.hive.register import Registrar, start_registrar
from garmexport.kafka.source import KafkaSource
from garmexport.observe.logs import log_event
from garmexport.pipeline.messages import WriterMessage
from garmexport.observe.metrics import Metrics
from garmexport.pipeline.coordinator import KafkaPort, Coordinator

log = logging.getLogger(__name__)
#: temp files older than this belong to dead processes: a live one publishes a staged file
#: within milliseconds of writing it
TEMP_GC_AGE_S = 3600.0


@dataclass(frozen=True)
class ExporterParts:
    registry: CollectorRegistry
    metrics: Metrics
    health: Health
    server: HealthServer
    #: the store, its one back-off and the executor (actors.cores worker threads), shared
    #: by every writer of the process
    site: WriterSite
    coordinator: Coordinator
    source: KafkaSource
    registrar: Registrar | None  # registers new day partitions in Hive; None: no metastore


def assemble(
    config: Config,
    instance: str,
    send: Callable[[str, int, WriterMessage], None],
    kafka: KafkaPort,
    on_assign: Callable[[list[int]], Mapping[int, int | None]],
    source: KafkaSource | None = None,
) -> ExporterParts:
    """Build one exporter's parts. ``send`` delivers a message to a writer, ``kafka`` is the
    reader's view of the consumer, ``on_assign`` is called with each assignment (it returns
    the seek positions); ``source`` is a consumer already subscribed (the group join under
    way since start-up), or None to subscribe now. Raises ConfigError if the metrics address
    cannot be bound, StorageError if the store cannot be opened."""
    registry = CollectorRegistry()
    metrics = Metrics.create(registry)
    health = Health(live_timeout_s=config.live_timeout_s(), metrics=metrics)
    health.tick(time.monotonic())
    server = _serve(config, registry, health)
    log_event(log, "metrics_serving", host=config.metrics.host, port=server.port)
    if config.metrics.port_file:
        write_port_file(config.metrics.port_file, server.port)
    storage = CountedStorage(open_output(config.output, instance), metrics.store_call)
    removed = storage.gc_temp(TEMP_GC_AGE_S, time.time())
    log_event(log, "temp_collected", files=removed, older_than_s=TEMP_GC_AGE_S)
    work = WriterWork(config.actors.worker_threads())
    # the event keeps its name of earlier releases: operators and dashboards read it
    log_event(log, "writer_threads", threads=work.threads)
    registrar = start_registrar(config, metrics)
    coordinator = Coordinator(config, instance, storage, metrics, send, kafka,
                              queued_bytes=lambda: work.queued_bytes, registrar=registrar)
    source = (source if source is not None else KafkaSource(config)).bind(
        on_assign, coordinator.revoke)
    metrics.set_up(True)
    backoff = SharedBackoff(config.storage.retry_initial_s, config.storage.retry_max_s)
    return ExporterParts(registry, metrics, health, server, WriterSite(storage, backoff, work),
                         coordinator, source, registrar)


def _serve(config: Config, registry: CollectorRegistry, health: Health) -> HealthServer:
    """The metrics and health server; a port that cannot be bound is a configuration error
    that names the setting (:func:`~garmexport.observe.health.listen_refused`)."""
    host, port = config.metrics.host, config.metrics.port
    try:
        return serve(host, port, registry, health)
    except OSError as exc:
        raise listen_refused(host, port, exc) from exc
