"""The supervisor's watch over its readers' answers: a reader that stops answering (stuck,
or stopped with SIGSTOP) is logged once, with since when and the partitions it holds, and
again when it answers again; meanwhile scrapes and health checks do not wait for it.

A background thread asks every reader's ``/health/ready`` every :data:`WATCH_EVERY_S`
(readiness carries the reader's partitions in its detail) with the probe's timeout. A
reader not serving yet (starting) is not watched; the first answer missed marks it silent
in the :class:`~garmexport.observe.reader_probe.ReaderProbe` and logs
``reader_not_answering``; the next answer clears the mark and logs
``reader_answering_again``. The rule of a transition is :func:`transition` (pure); the
health fold says a silent reader is not ready, and not live once it has been silent for
the live timeout (:mod:`garmexport.observe.health_fold`).

A reader whose process has ended is not asked (the supervisor logs its exit), and once the
instance is stopping (:meth:`ReaderWatch.stopping`) a reader that closes its server on its
way out is marked silent without a warning: a clean stop logs no ``reader_not_answering``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from garmexport.observe.health import READY_PATH
from garmexport.observe.logs import log_event
from garmexport.observe.reader_probe import Answer, ReaderProbe

log = logging.getLogger(__name__)
#: how often each reader is asked; a stuck reader is logged within this and the probe's
#: timeout
WATCH_EVERY_S = 1.0


@dataclass(frozen=True)
class Heard:
    """What the watch knows of one reader: when it last answered (monotonic seconds, None
    before its first answer), the partitions it said it held then, and whether it is
    silent now."""

    last: float | None = None
    partitions: str = ""
    silent: bool = False


def transition(heard: Heard, answer: Answer, now: float) -> tuple[Heard, str | None]:
    """The reader's state after ``answer`` at ``now``, and the event to log: ``silent``
    (it stopped answering), ``answering`` (it answers again), or None."""
    if answer.status is not None:
        partitions = _partitions(answer.body, heard.partitions)
        return Heard(now, partitions, False), "answering" if heard.silent else None
    if not answer.serving or heard.silent:
        return heard, None  # starting (not watched yet), or already said
    return Heard(heard.last, heard.partitions, True), "silent"


def _partitions(body: bytes, before: str) -> str:
    try:
        detail = json.loads(body).get("detail", {})
    except (ValueError, AttributeError):
        return before
    return str(detail.get("partitions", "")) if isinstance(detail, dict) else before


class ReaderWatch:
    """Watches ``pids`` (reader name -> pid) through ``probe`` on a daemon thread, from
    :meth:`start` until :meth:`stop`; ``ended(name)`` says a reader's process has ended."""

    def __init__(self, probe: ReaderProbe, pids: Mapping[str, int],
                 every_s: float = WATCH_EVERY_S,
                 ended: Callable[[str], bool] = lambda name: False) -> None:
        self._probe, self._pids, self._every_s = probe, dict(pids), every_s
        self._ended = ended
        self._heard = {name: Heard() for name in pids}
        self._stopping = threading.Event()
        self._instance_stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reader-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()

    def stopping(self) -> None:
        """The instance is stopping: readers close their servers on their way out."""
        self._instance_stopping.set()

    def _run(self) -> None:
        while not self._stopping.wait(self._every_s):
            for name in self._pids:
                if self._stopping.is_set():
                    return
                if not self._ended(name):
                    self.check(name, time.monotonic())

    def check(self, name: str, started: float) -> None:
        """Ask reader ``name`` once; mark and log a change."""
        answer = self._probe.get(name, READY_PATH, ask_silent=True)
        now = time.monotonic()
        heard, event = transition(self._heard[name], answer, now)
        before, self._heard[name] = self._heard[name], heard
        if event == "silent":
            since = before.last if before.last is not None else started
            self._probe.mark_silent(name, since, answer.error)
            if self._instance_stopping.is_set():
                log_event(log, "reader_not_answering", level=logging.DEBUG, child=name,
                          pid=self._pids[name], error=answer.error, effect="stopping")
                return
            log_event(log, "reader_not_answering", level=logging.WARNING, child=name,
                      pid=self._pids[name], silent_s=round(now - since, 1),
                      partitions=heard.partitions or "none", error=answer.error,
                      effect="the instance is not ready, and not live once the reader "
                             "has been silent for the live timeout; scrapes leave its "
                             "series out without waiting for it")
        elif event == "answering":
            self._probe.mark_answering(name)
            log_event(log, "reader_answering_again", child=name, pid=self._pids[name],
                      silent_s=round(now - (before.last or now), 1),
                      partitions=heard.partitions or "none")
