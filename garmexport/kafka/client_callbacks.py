"""The Kafka client's callbacks: what it says about itself, turned into garmexport's log
lines and state.

librdkafka prints its own log lines to stderr unless the client is given a ``logger``; then
it hands them to Python (served by the consumer's polls, in the polling thread). Here they
go out through :func:`garmexport.observe.logs.log_event` as ``kafka_log`` events of the
``garmexport.kafka.signals`` logger (so ``log.format = "json"`` covers them), with repeats of one
message within ``REPEAT_WINDOW_S`` swallowed and counted (``suppressed=N`` on the next line
of that message). The error and statistics callbacks feed :class:`BrokerLink`; its
transitions become one ``broker_unreachable`` (WARNING, with the reason) and one
``broker_reachable`` event, and :attr:`KafkaSignals.problem` feeds readiness. A session
lost just after this process itself was not scheduled (SIGSTOP, a freeze, a VM pause:
:mod:`garmexport.process.pause_watch`) is no sign of the broker: it leaves the broker's
state alone, is logged as ``session_lost`` with how long the process stood still, feeds
readiness as :attr:`KafkaSignals.rejoining` until the next assignment, and that
assignment is logged as ``session_restored``.

Every other client garmexport creates (the tools' consumers, producer and admin clients)
takes :func:`client_log_settings`: the same relay without the broker state, one per process,
so the repeats of several short-lived clients are counted together.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from garmexport.kafka.broker_link import BrokerLink, Change
from garmexport.observe.logs import log_event
from garmexport.process.pause_watch import PauseWatch
from garmexport.observe.repeat_limit import RepeatLimiter, repeat_key

#: the logger keeps the module's earlier name: operators' filters and dashboards select the
#: client's ``kafka_log`` lines by it (README, Logs)
LOGGER = "garmexport.kafka.signals"
log = logging.getLogger(LOGGER)
REPEAT_WINDOW_S = 60.0
#: how often librdkafka reports its statistics (unless [kafka] says otherwise): the
#: statistics tell when a broker connection is up again after ``_ALL_BROKERS_DOWN``; they
#: are only parsed while waiting for that.
STATISTICS_INTERVAL_MS = 2000
MESSAGE_MAX_CHARS = 1000
#: a pause of the process that ended this recently explains a lost group session
PAUSE_EXPLAINS_S = 60.0


class _Relay:
    """The ``logger`` given to the client: it only calls ``log(level, fmt, *args)``."""

    def __init__(self, limiter: RepeatLimiter, clock: Callable[[], float]) -> None:
        self._limiter, self._clock = limiter, clock

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if not log.isEnabledFor(level):
            return
        if len(args) == 3:  # "%s [%s] %s": facility, client name, message
            facility, client, message = (str(a) for a in args)
        else:
            facility, client, message = "", "", fmt % args if args else fmt
        self.emit(level, "kafka_log", facility=facility, client=client, message=message)

    def emit(self, level: int, event: str, **fields: str) -> None:
        """Log ``event`` unless it repeats within the window (all fields make the key)."""
        swallowed = self._limiter.admit(repeat_key(event, *fields.values()), self._clock())
        if swallowed is None:
            return
        shown: dict[str, Any] = {k: v[:MESSAGE_MAX_CHARS] for k, v in fields.items()}
        if swallowed:
            shown["suppressed"] = swallowed
        log_event(log, event, level=level, **shown)


@functools.cache
def _shared_relay() -> _Relay:
    return _Relay(RepeatLimiter(REPEAT_WINDOW_S), time.monotonic)


_DROPPED = logging.getLogger("garmexport.kafka.dropped")
_DROPPED.addHandler(logging.NullHandler())
_DROPPED.propagate = False


def client_log_settings(quiet: bool = False) -> dict[str, object]:
    """Settings to merge into a client garmexport creates outside the exporter's consumer:
    its librdkafka lines become rate-limited ``kafka_log`` events, never raw stderr lines
    (served by that client's polls, flushes and metadata calls). ``quiet``: drop them, for
    a probe whose failure is reported by the one error it raises."""
    return {"logger": _DROPPED if quiet else _shared_relay()}


class KafkaSignals:
    """Callbacks for one consumer (merge :meth:`settings` into its config) and the state
    they build. All callbacks run inside the consumer's polls."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 pauses: PauseWatch | None = None) -> None:
        """``pauses``: the process's pauses (:mod:`garmexport.process.pause_watch`), to
        tell a session lost because this process was not scheduled from a broker's fault."""
        self._clock = clock
        self.link = BrokerLink()
        self._relay = _Relay(RepeatLimiter(REPEAT_WINDOW_S), clock)
        self._pauses = pauses
        #: why the session was lost while this process was not scheduled, until the next
        #: assignment ("" otherwise), and when (monotonic seconds)
        self._rejoining = ""
        self._lost_at = 0.0

    def settings(self, configured: dict[str, object]) -> dict[str, object]:
        """The client settings that route logs and errors here (``configured`` may set
        ``statistics.interval.ms`` itself; 0 there turns off noticing a reconnect early)."""
        return {"logger": self._relay, "error_cb": self._error, "stats_cb": self._statistics,
                "statistics.interval.ms": configured.get("statistics.interval.ms",
                                                         STATISTICS_INTERVAL_MS)}

    @property
    def problem(self) -> str:
        """Why the broker is unreachable ("" while it is reachable)."""
        return self.link.problem

    @property
    def rejoining(self) -> str:
        """Why the group session was lost while this process was not scheduled, until the
        group assigns partitions again ("" otherwise): the process is rejoining its group,
        and the broker is not to blame."""
        return self._rejoining

    def assigned(self) -> None:
        now = self._clock()
        if self._rejoining:
            self._rejoining = ""
            log_event(log, "session_restored", down_s=round(max(0.0, now - self._lost_at), 1))
        self._report(self.link.assigned(now))

    def lost(self, partitions: int) -> None:
        now = self._clock()
        pause = self._pauses.recent(PAUSE_EXPLAINS_S) if self._pauses else None
        if pause is None:
            self._report(self.link.partitions_lost(
                f"group session lost ({partitions} partitions): the broker stopped answering",
                now))
            return
        # what is known: no thread of this process ran, so no heartbeat left it
        reason = (f"group session lost ({partitions} partitions): the process was not "
                  f"scheduled for {pause.seconds:.1f} s (stopped, frozen, or its VM paused), "
                  "so its heartbeats stopped; the broker may well be fine")
        if not self._rejoining:  # one loss per stop: its later reports add nothing
            self._rejoining, self._lost_at = reason, now
            log_event(log, "session_lost", level=logging.WARNING, reason=reason,
                      not_scheduled_s=round(pause.seconds, 1))

    def _error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._report(self.link.all_brokers_down(f"all brokers down: {err.str()}",
                                                    self._clock()))
        elif err.code() != KafkaError._TRANSPORT:  # transport errors come as log lines too
            self._relay.emit(logging.ERROR if err.fatal() else logging.WARNING, "kafka_error",
                             code=err.name(), reason=err.str())

    def _statistics(self, text: str) -> None:
        if not self.link.waits_for_connection:
            return
        brokers = json.loads(text).get("brokers", {})
        if any(b.get("state") == "UP" and b.get("source") != "logical" for b in brokers.values()):
            self._report(self.link.connection_up(self._clock()))

    @staticmethod
    def _report(change: Change | None) -> None:
        if change is None:
            return
        if change.reachable:
            log_event(log, "broker_reachable", down_s=round(change.down_s, 1))
        else:
            log_event(log, "broker_unreachable", level=logging.WARNING, reason=change.reason)
