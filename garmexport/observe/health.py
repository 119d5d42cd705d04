"""The exporter's HTTP face: liveness and readiness state, and the server for them.

Endpoints (all GET, on one port; Marathon's health checks and Prometheus use the same one):

- ``/metrics``: the injected registry in the Prometheus text format (``generate_latest``);
  ``/metrics?reader=rK``: the same with ``reader="rK"`` in every sample, what a reader
  answers its supervisor (:mod:`garmexport.observe.metrics_merge`), rendered by
  :mod:`garmexport.observe.exposition`. A supervisor serves a function's text instead.
- ``/health/live``: 200 while the main loop ticked within ``live_timeout_s`` and no stall
  (a store failure, or one writer message still running) has lasted longer than that,
  else 503. A failed liveness check makes Marathon
  kill and restart the task: it means stuck (the loop cannot make progress).
- ``/health/ready``: 200 when the consumer has joined the group and got its assignment
  (possibly empty: see ``mesos/README.md``), the broker is reachable, the writers are
  healthy and the store is reachable, else 503. A session lost because this process was
  not scheduled (SIGSTOP, a freeze) reads ``rejoining the group: ...``, not "broker
  unreachable", until the group assigns partitions again. Readiness gates rolling
  upgrades; it never kills.

Both health answers carry a small JSON body ``{"ok": bool, "reasons": [..]}`` naming what
is wrong; readiness adds ``"detail": {name: note}`` for what is behind without making it
fail (``hive``: partition registration failing; ``partitions``: the partitions this
process holds, which a supervisor names when the process stops answering). Invariants: :class:`Health` reads no clock (callers pass ``now`` in monotonic
seconds; only the server reads ``clock`` when a request arrives), and its flags are
written by the exporter thread and read by server threads under one lock.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from garmexport.errors import ConfigError
from garmexport.observe.exposition import Renderer
from garmexport.observe.metrics import Metrics

LIVE_PATH = "/health/live"
READY_PATH = "/health/ready"
METRICS_PATH = "/metrics"
#: the query parameter of ``/metrics`` that adds a ``reader`` label to every sample
READER_PARAM = "reader"
#: label sets of ``/metrics?reader=`` whose line heads a server keeps
MAX_RENDERERS = 4


def reader_metrics_path(reader: str) -> str:
    """The path of ``reader``'s ``/metrics`` with ``reader="<reader>"`` in every sample."""
    return f"{METRICS_PATH}?{urllib.parse.urlencode({READER_PARAM: reader})}"


@dataclass(frozen=True)
class Status:
    """One health answer: ``ok`` and, when not ok, why."""

    ok: bool
    reasons: tuple[str, ...] = ()
    #: (name, note) of things worth knowing that do not make the answer fail (e.g. "hive")
    detail: tuple[tuple[str, str], ...] = ()

    @property
    def http_status(self) -> int:
        return 200 if self.ok else 503

    def body(self) -> bytes:
        body: dict[str, object] = {"ok": self.ok, "reasons": list(self.reasons)}
        if self.detail:
            body["detail"] = dict(self.detail)
        return json.dumps(body).encode()


class Health:
    """Liveness and readiness of one exporter process, fed by the exporter's main loop."""

    def __init__(self, live_timeout_s: float, metrics: Metrics | None = None) -> None:
        """``live_timeout_s``: longest time without :meth:`tick` that still counts as alive.
        ``metrics``: if given, its ``ready`` gauge follows :meth:`readiness`."""
        if live_timeout_s <= 0:
            raise ValueError(f"live_timeout_s must be positive, not {live_timeout_s}")
        self._timeout_s = live_timeout_s
        self._metrics = metrics
        self._lock = threading.Lock()
        self._last_tick: float | None = None
        self._assigned: int | None = None
        self._stalled: tuple[float, str] | None = None
        self._problems: dict[str, str] = {"broker": "", "session": "", "writers": "",
                                          "store": ""}
        self._details: dict[str, str] = {}

    def tick(self, now: float) -> None:
        """The main loop made progress at ``now`` (monotonic seconds)."""
        with self._lock:
            self._last_tick = now

    def set_stalled(self, since: float | None, why: str = "") -> None:
        """The loop cannot make progress since ``since`` (monotonic seconds; a store
        failure episode, ``why`` its reason), or None: it can."""
        with self._lock:
            self._stalled = None if since is None else (since, why)

    def set_assignment(self, partitions: int | None) -> None:
        """Partitions assigned by the group; None until the first assignment and after a
        revoke or loss, until the next one. Zero partitions is an assignment."""
        with self._lock:
            self._assigned = partitions
        self._mirror()

    def set_writers_healthy(self, healthy: bool, why: str = "writers unhealthy") -> None:
        """Writers can take events (False e.g. while an actor restarts); ``why`` if not."""
        with self._lock:
            self._problems["writers"] = "" if healthy else why
        self._mirror()

    def set_broker_problem(self, problem: str) -> None:
        """Why the Kafka broker is unreachable ("" when it is reachable)."""
        with self._lock:
            self._problems["broker"] = f"broker unreachable: {problem}" if problem else ""
        self._mirror()

    def set_rejoining(self, why: str) -> None:
        """Why the group session was lost while the broker was fine (the process was not
        scheduled), while it rejoins the group ("" once assigned again)."""
        with self._lock:
            self._problems["session"] = f"rejoining the group: {why}" if why else ""
        self._mirror()

    def set_store_reachable(self, reachable: bool, why: str = "store unreachable") -> None:
        """The last storage call succeeded (False while retrying); ``why`` if not."""
        with self._lock:
            self._problems["store"] = "" if reachable else why
        self._mirror()

    def set_detail(self, name: str, note: str) -> None:
        """A note shown in the readiness body without failing it ('' removes it): Hive
        registration lagging must not stop a rolling upgrade."""
        with self._lock:
            if note:
                self._details[name] = note
            else:
                self._details.pop(name, None)

    def liveness(self, now: float) -> Status:
        """Alive iff a tick came at most ``live_timeout_s`` before ``now`` and the loop has
        not been stalled for longer than that."""
        with self._lock:
            last, stalled = self._last_tick, self._stalled
        if last is None:
            return Status(False, ("main loop has not ticked yet",))
        silent_s = now - last
        if silent_s > self._timeout_s:
            return Status(False, (f"main loop silent for {silent_s:.1f}s > {self._timeout_s:g}s",))
        if stalled is not None and now - stalled[0] > self._timeout_s:
            return Status(False, (f"no progress for {now - stalled[0]:.1f}s > {self._timeout_s:g}s: "
                                  f"{stalled[1] or 'store failing'}",))
        return Status(True)

    def readiness(self) -> Status:
        """Ready iff assigned, broker reachable, not rejoining, writers healthy and store
        reachable; reasons list each miss."""
        with self._lock:
            reasons = [] if self._assigned is not None else ["no partition assignment yet"]
            reasons += [why for why in self._problems.values() if why]
            detail = tuple(sorted(self._details.items()))
        return Status(not reasons, tuple(reasons), detail)

    def _mirror(self) -> None:
        # Flags are only written by the exporter thread, so this cannot interleave with
        # another setter and the gauge follows the last change.
        if self._metrics is not None:
            self._metrics.set_ready(self.readiness().ok)


def stall_of(store_since: float | None, store_reason: str,
             running: tuple[float, str] | None) -> tuple[float | None, str]:
    """What holds the loop up, for :meth:`Health.set_stalled`: a store failure episode
    (monotonic start, its reason), or else the work that has been running longest (a store
    call that does not return: start, what), or nothing (None, "")."""
    if store_since is not None:
        return store_since, store_reason
    if running is not None:
        return running
    return None, ""


class HealthSource(Protocol):
    """What :func:`serve` asks: one process's :class:`Health`, or the fold of an instance's
    readers (:class:`garmexport.observe.health_fold.ReadersHealth`)."""

    def liveness(self, now: float) -> Status: ...

    def readiness(self) -> Status: ...


class HealthServer:
    """A running HTTP server; :attr:`port` is the bound port (useful when asked for 0)."""

    def __init__(self, httpd: ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._httpd = httpd
        self._thread = thread
        self.host, self.port = httpd.server_address[:2]

    def close(self) -> None:
        """Stop serving, close the socket and wait for the serving thread."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def serve(host: str, port: int, registry: CollectorRegistry | Callable[[], bytes],
          health: HealthSource, clock: Callable[[], float] = time.monotonic) -> HealthServer:
    """Start serving ``/metrics`` and the health endpoints on (host, port) in a daemon
    thread and return at once. ``registry``: what ``/metrics`` shows, or a function that
    returns its body (a supervisor's merge). ``port`` 0 binds a free port. ``clock``
    gives ``now`` for liveness (same clock as the callers of :meth:`Health.tick`).
    Raises OSError if the address cannot be bound."""
    # by reader label, each keeping its line heads: one in practice (the supervisor's
    # name for this reader); a few at most, whatever a client asks
    renderers: dict[str, Renderer] = {}

    def metrics_body(query: str) -> bytes:
        if not isinstance(registry, CollectorRegistry):
            return registry()
        reader = urllib.parse.parse_qs(query).get(READER_PARAM)
        if not reader:
            return generate_latest(registry)
        renderer = renderers.get(reader[-1]) or Renderer({"reader": reader[-1]})
        if len(renderers) < MAX_RENDERERS:
            renderers.setdefault(reader[-1], renderer)
        return renderer.render(registry).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (name fixed by http.server)
            path, _, query = self.path.partition("?")
            if path == METRICS_PATH:
                self._answer(200, CONTENT_TYPE_LATEST, metrics_body(query))
            elif path in (LIVE_PATH, READY_PATH):
                status = health.liveness(clock()) if path == LIVE_PATH else health.readiness()
                self._answer(status.http_status, "application/json", status.body())
            else:
                self._answer(404, "text/plain; charset=utf-8", b"not found\n")

        def _answer(self, code: int, content_type: str, body: bytes) -> None:
            try:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                # the asker gave up first (a probe's timeout while this process was
                # stopped): nothing to answer, and no traceback on stderr, which
                # socketserver prints for any error left to it
                self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            # One access line per scrape and health probe would drown the event log.
            pass

    httpd = ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads = True
    # A short poll interval bounds how long close() waits for the loop to notice shutdown.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                              name="garmexport-http", daemon=True)
    thread.start()
    return HealthServer(httpd, thread)


def listen_refused(host: str, port: int, exc: OSError) -> ConfigError:
    """The error of a metrics address that cannot be bound: it names the setting, which the
    bare OSError ("Address already in use") does not."""
    return ConfigError(
        f"metrics.port (GARMEXPORT_METRICS_PORT) = {port} on metrics.host {host!r}: cannot "
        f"listen: {exc.strerror or exc}: stop what holds the port, or choose a free port "
        "(0: any free port)")


def check_listen(host: str, port: int) -> None:
    """Bind (host, port) as :func:`serve` does and let it go at once: a start finds a busy
    port before it waits on anything (the broker, a JVM root's takeover). Port 0 is never
    busy. Raises :func:`listen_refused`'s ConfigError."""
    if port == 0:
        return
    try:
        ThreadingHTTPServer((host, port), BaseHTTPRequestHandler).server_close()
    except OSError as exc:
        raise listen_refused(host, port, exc) from exc


def write_port_file(path: str, port: int) -> None:
    """Write ``port`` to ``path`` (``metrics.port_file``) so that a reader never sees a
    half-written number: written beside it, then renamed over it."""
    target = Path(path)
    staged = target.with_name(f".{target.name}.tmp")
    staged.write_text(f"{port}\n")
    staged.replace(target)


def read_port_file(path: str) -> int | None:
    """The port :func:`write_port_file` wrote to ``path``, or None while there is none."""
    try:
        return int(Path(path).read_text())
    except (OSError, ValueError):
        return None
