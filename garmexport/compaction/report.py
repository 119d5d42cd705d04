"""Compaction's outcome for Prometheus: pushed to a Pushgateway, written to a textfile.

A batch job cannot be scraped. When a run ends, succeeded or not, :func:`reported`
builds a fresh registry (:class:`~garmexport.observe.metrics.CompactionMetrics`, names in
``config/METRICS.md``) and hands it to the targets ``[compaction]`` names:

- ``pushgateway_url``: pushed under job ``garmexport_compaction`` with the grouping key
  ``root`` (the output root URI, so two roots never overwrite each other). A successful
  run replaces the group (HTTP PUT); a failed one replaces only the metrics it carries
  (POST), which leaves the last success time of an earlier run in place.
- ``metrics_textfile``: written atomically (temp file, rename) for node_exporter's textfile
  collector; a failed run carries over the last success time of the file it replaces.

A run succeeds when it returns with no file left alone for a problem (exit 0). A dry run
reports nothing: it changes nothing, so it must not pass for a compaction. Reporting never
changes the outcome: a target that fails is logged (``compaction_report_failed``), and the
``GarmexportCompactionStale`` alert then fires once the schedule's margin has passed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, push_to_gateway, pushadd_to_gateway, write_to_textfile
from prometheus_client.parser import text_string_to_metric_families

from garmexport.observe.logs import log_event
from garmexport.observe.metrics import CompactionMetrics

log = logging.getLogger(__name__)
JOB = "garmexport_compaction"
PUSH_TIMEOUT_S = 10.0
_LAST_SUCCESS = "garmexport_compaction_last_success_timestamp_seconds"


class Targets(Protocol):
    """Where a run's outcome goes: the ``[compaction]`` settings of the same names
    (``settings.config.CompactionConfig``); empty: not there."""

    @property
    def pushgateway_url(self) -> str: ...

    @property
    def metrics_textfile(self) -> str: ...


def reported(config: Targets, root_uri: str, dry_run: bool, run: Callable[[], Any],
             wall_s: Callable[[], float] = time.time) -> Any:
    """Call ``run`` (it returns a job.Summary), report its outcome, return its result or
    raise its exception."""
    if dry_run or not (config.pushgateway_url or config.metrics_textfile):
        return run()
    started, began = time.monotonic(), wall_s()
    summary = None
    try:
        summary = run()
    finally:
        duration = time.monotonic() - started
        success = summary is not None and not summary.problems
        registry = CollectorRegistry()
        metrics = CompactionMetrics.create(registry)
        metrics.run(success=success, finished_s=began + duration, duration_s=duration,
                    days=getattr(summary, "days_compacted", 0),
                    files_in=getattr(summary, "files_in", 0),
                    files_out=getattr(summary, "files_out", 0),
                    bytes_in=getattr(summary, "bytes_in", 0),
                    problems=len(getattr(summary, "problems", ())))
        report(config, root_uri, registry, metrics, success, began + duration)
    return summary


def report(config: Targets, root_uri: str, registry: CollectorRegistry,
           metrics: CompactionMetrics, success: bool, finished_s: float) -> None:
    """Send ``registry`` to every configured target; log (never raise) a failed one."""
    if success:
        metrics.last_success(finished_s)
    if config.pushgateway_url:
        push = push_to_gateway if success else pushadd_to_gateway
        try:
            push(config.pushgateway_url, job=JOB, registry=registry,
                 grouping_key={"root": root_uri}, timeout=PUSH_TIMEOUT_S)
            log_event(log, "compaction_reported", target=config.pushgateway_url, success=success)
        except OSError as exc:  # URLError and HTTPError are OSErrors
            log_event(log, "compaction_report_failed", level=logging.ERROR,
                      target=config.pushgateway_url, error=str(exc))
    if config.metrics_textfile:
        path = config.metrics_textfile
        try:
            if not success:
                previous = last_success_in(path)
                if previous is not None:
                    metrics.last_success(previous)
            write_to_textfile(path, registry)
            log_event(log, "compaction_reported", target=path, success=success)
        except OSError as exc:
            log_event(log, "compaction_report_failed", level=logging.ERROR, target=path,
                      error=str(exc))


def last_success_in(path: str) -> float | None:
    """The last success time a textfile written by an earlier run holds (None: no file,
    no such sample, or not a metrics file)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == _LAST_SUCCESS:
                    return float(sample.value)
    except ValueError:
        return None
    return None

