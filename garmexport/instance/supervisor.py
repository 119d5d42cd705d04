"""``garmexport run`` with ``actors.parallelism`` > 1: a small process that starts the
readers and makes them one instance for its operator.

Each reader is today's exporter (``garmexport run --reader rK``) in its own OS process:
its own consumer in the instance's group, its own actors and worker threads, instance id
``<instance>-rK``, its share of the memory budget and ``actors.cores`` worker threads
(:mod:`garmexport.instance.shares`). Frames never cross a process boundary; the
supervisor touches no event. What it does:

- serves the instance's one metrics port: ``/metrics`` joins every reader's series
  (:mod:`garmexport.observe.metrics_merge`), ``/health/*`` folds theirs
  (:mod:`garmexport.observe.health_fold`); the readers serve on private loopback ports;
  a reader that stops answering is logged, and left out of scrapes without a wait
  (:mod:`garmexport.observe.reader_watch`);
- forwards SIGTERM/SIGINT: the first asks every reader for a clean stop, the second
  makes them (and the supervisor) exit at once with 143/130, as one process does;
- takes the instance down when a reader ends on its own: the others are asked to stop
  cleanly (``stop_signal.SIBLING_ENDED``, so that they say why they stop) and the instance
  exits with the failed reader's status (Marathon restarts the task; the commit protocol
  makes the restart safe, and the readers' clean stops mean little is exported twice as
  work). Restarting only the reader was not chosen: it would hide a crash loop from
  Marathon and gives nothing the protocol does not already give.

Invariants: readers never outlive the supervisor (each asks the kernel for SIGKILL when it
ends, :mod:`garmexport.process.parent_death`); readers share the supervisor's process group, so
that whatever signals the group (a terminal's Ctrl-C and Ctrl-Z, ``kill -- -PGID``, a tree
kill) reaches the whole instance, and the supervisor forwards a first stop as one that
never counts as a reader's second (``stop_signal.INSTANCE_STOPPING``); the supervisor exits
only after every reader has been reaped (after a second signal, one that has not exited
within :data:`FORCED_EXIT_WAIT_S` is killed first).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass

from garmexport.instance.shares import (
    exit_status, how_it_ended, instance_exit_code, left_by, reader_name, reader_settings,
)
from garmexport.observe.health import serve, write_port_file
from garmexport.observe.health_fold import ReadersHealth
from garmexport.observe.logs import log_event
from garmexport.observe.metrics_merge import ReadersMetrics
from garmexport.observe.reader_probe import ReaderProbe
from garmexport.observe.reader_watch import ReaderWatch
from garmexport.process import stop_signal
from garmexport.process.stop_signal import EXIT_ON_SECOND
from garmexport.settings.config import Config
from garmexport.settings.load import ENV_PREFIX

log = logging.getLogger(__name__)
#: how often the supervisor looks at its readers and at the signals it got
WATCH_S = 0.1
#: past a reader's own hard deadline (shutdown_timeout_s + 10 s), the supervisor kills
KILL_MARGIN_S = 20.0
#: a reader not serving yet counts as live this long after the start (imports, the
#: consumer, the store: about a second here), as a starting process is before it answers
#: (or the live timeout, if longer)
START_GRACE_S = 30.0
#: after a second signal, how long the readers get to write what they abandon and exit (a
#: forced stop is immediate: counting the open files and one log line)
FORCED_EXIT_WAIT_S = 5.0
#: the readers' first stop was INSTANCE_STOPPING, which never counts, so the instance's
#: second signal must reach them twice; and signals of one kind do not queue (Python runs a
#: handler once for all that arrived before it ran): so it is sent at this pace to the
#: readers still running until they exit
RESEND_EVERY_S = 0.05


@dataclass
class ReaderProcess:
    name: str
    process: subprocess.Popen[bytes]
    status: int | None = None  # exit status once reaped


def reader_env(config: Config, readers: int, index: int, port_file: str,
               base: Mapping[str, str]) -> dict[str, str]:
    """The environment of reader ``index``: ``base`` with the reader's own settings (the
    last layer of its configuration, so they win over the file and the operator's)."""
    own = reader_settings(config, readers, index, port_file)
    return {**base, **{ENV_PREFIX + key: value for key, value in own.items()}}


def instance_metrics(probe: ReaderProbe) -> ReadersMetrics:
    """What the instance's ``/metrics`` shows: every reader's series, joined."""
    return ReadersMetrics(probe)


def run_supervisor(config: Config, instance: str, config_path: str | None) -> int:
    """Run ``actors.readers()`` readers until stopped or one fails; the exit code."""
    count = config.actors.readers()
    signals: list[int] = []
    for signum in EXIT_ON_SECOND:
        signal.signal(signum, lambda signum, frame: signals.append(signum))
    workdir = tempfile.mkdtemp(prefix=f"garmexport-{instance}-")
    port_files = {reader_name(i): os.path.join(workdir, f"{reader_name(i)}.port")
                  for i in range(count)}
    reports = {name: os.path.join(workdir, f"{name}.stop.json") for name in port_files}
    probe = ReaderProbe(port_files)
    # the readers' own threshold (their config is this one): a silent reader fails the
    # instance's liveness no sooner than a stuck loop fails one process's
    live_timeout_s = config.live_timeout_s()
    health = ReadersHealth(probe, started=time.monotonic(),
                           start_grace_s=max(START_GRACE_S, live_timeout_s),
                           live_timeout_s=live_timeout_s)
    server = serve(config.metrics.host, config.metrics.port, instance_metrics(probe), health)
    readers: list[ReaderProcess] = []
    watch: ReaderWatch | None = None
    try:
        log_event(log, "instance_starting", instance=instance, readers=count,
                  topic=config.source.topic, root=config.output.root)
        # first, before any reader says where its private server listens
        log_event(log, "metrics_serving", host=config.metrics.host, port=server.port)
        if config.metrics.port_file:
            write_port_file(config.metrics.port_file, server.port)
        for index, (name, port_file) in enumerate(port_files.items()):
            command = [sys.executable, "-m", "garmexport", "run", "--instance",
                       f"{instance}-{name}", "--reader", name, "--parent", str(os.getpid()),
                       "--stop-report", reports[name]]
            if config_path:
                command += ["--config", config_path]
            # started with the stop signals held back, until it can honour them
            # (stop_signal.record): a stop during its imports must not kill it
            with stop_signal.blocked():
                process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    command, env=reader_env(config, count, index, port_file, os.environ))
            readers.append(ReaderProcess(name, process))
            log_event(log, "reader_started", child=name, pid=process.pid,
                      instance=f"{instance}-{name}")
        by_name = {r.name: r for r in readers}
        watch = ReaderWatch(probe, {r.name: r.process.pid for r in readers},
                            ended=lambda name: by_name[name].process.poll() is not None)
        watch.start()
        return _watch(readers, signals, config.protocol.shutdown_timeout_s + KILL_MARGIN_S,
                      reports, watch)
    finally:
        if watch is not None:
            watch.stop()
        for reader in readers:
            if reader.process.poll() is None:  # only after a bug
                reader.process.kill()
        server.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _watch(readers: list[ReaderProcess], signals: list[int], stop_within_s: float,
           reports: Mapping[str, str], watch: ReaderWatch | None = None) -> int:
    """Forward signals, reap readers, stop the rest when one ends; the exit code."""
    ended: list[int] = []
    handled = 0
    stop_by: float | None = None
    reason = ""
    while True:
        while handled < len(signals):
            signum = signals[handled]
            handled += 1
            if handled > 1:  # the readers' second: they exit at once too
                return _forced_stop(readers, reports, signum)
            if stop_by is None:  # else the readers are stopping already: ask them once
                # a stop that never counts as their second: they may have had the
                # operator's signal directly too (Ctrl-C to the group, a tree kill)
                _send(readers, stop_signal.INSTANCE_STOPPING)
                if watch is not None:
                    watch.stopping()
                reason = signal.Signals(signum).name
                stop_by = time.monotonic() + stop_within_s
        for reader in readers:
            if reader.status is None and reader.process.poll() is not None:
                reader.status = exit_status(reader.process.returncode)
                ended.append(reader.status)
                log_event(log, "reader_exited", child=reader.name, code=reader.status,
                          level=logging.INFO if reader.status == 0 else logging.ERROR)
                if stop_by is None:  # on its own: the instance goes down with it
                    reason = how_it_ended(reader.name, reader.process.returncode)
                    stop_by = time.monotonic() + stop_within_s
                    if watch is not None:
                        watch.stopping()
                    _send(readers, stop_signal.SIBLING_ENDED)  # a clean stop, saying why
        if all(reader.status is not None for reader in readers):
            code = instance_exit_code(ended)
            log_event(log, "instance_stopped", code=code, reason=reason,
                      readers={r.name: r.status for r in readers})
            return code
        if stop_by is not None and time.monotonic() > stop_by:
            log_event(log, "readers_killed", level=logging.ERROR,
                      readers=[r.name for r in readers if r.status is None])
            _send(readers, signal.SIGKILL)
            stop_by = float("inf")
        time.sleep(WATCH_S)


def _forced_stop(readers: list[ReaderProcess], reports: Mapping[str, str], signum: int) -> int:
    """After a second signal: the readers get :data:`FORCED_EXIT_WAIT_S` to write what they
    abandon (their ``stop_forced`` fields) and exit, the rest are killed, and the last line
    says the stop was forced and what every reader left; the instance's exit code."""
    deadline = time.monotonic() + FORCED_EXIT_WAIT_S
    while any(r.process.poll() is None for r in readers) and time.monotonic() < deadline:
        _send(readers, signum)
        time.sleep(RESEND_EVERY_S)
    killed = {r.name for r in readers if r.process.poll() is None}
    for reader in readers:
        if reader.name in killed:
            reader.process.kill()
            reader.process.wait()
    said = {r.name: _read_report(reports[r.name]) if r.name in reports else None
            for r in readers}
    code = EXIT_ON_SECOND[signum]
    log_event(log, "instance_stopped", level=logging.WARNING, code=code,
              reason=f"second {signal.Signals(signum).name}: stop forced",
              readers={r.name: exit_status(r.process.returncode) for r in readers},
              open_files=sum(d.get("open_files", 0) for d in said.values() if d),
              abandoned={r.name: left_by(exit_status(r.process.returncode), said[r.name],
                                         r.name in killed) for r in readers})
    return code


def _read_report(path: str) -> dict | None:
    """The ``stop_forced`` fields a reader wrote, or None (it wrote none)."""
    try:
        with open(path, encoding="utf-8") as report:
            found = json.load(report)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _send(readers: list[ReaderProcess], signum: int) -> None:
    for reader in readers:
        if reader.status is None and reader.process.poll() is None:
            reader.process.send_signal(signum)
