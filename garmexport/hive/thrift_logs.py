"""The thrift runtime's own log lines, relayed as garmexport's: expected failures stay quiet.

While a metastore is down, every connection attempt of the ``thrift`` library logs an
ERROR (``thrift.transport.TSocket``: "Could not connect to any of [...]") and an INFO line
with a traceback per address. Registration already reports the failure once per round, as
the WARNING ``hive_register_failed`` with the error, and retries: an ERROR line beside it
would trip log-based alerting for an expected, handled condition. So, as librdkafka's
lines are (:mod:`garmexport.kafka.client_callbacks`), the ``thrift`` logger's records go out as
``thrift_log`` events of the ``garmexport.hive.thrift`` logger with ``thrift_logger``
and ``message`` fields (no traceback): ERROR and above at WARNING, the rest at DEBUG, and
repeats of one message within ``REPEAT_WINDOW_S`` swallowed and counted (``suppressed=N``
on the next line of that message).

Invariants: installed once per process (:func:`relay_thrift_logs` is idempotent); the
``thrift`` logger no longer propagates, so no raw thrift line reaches the root handlers.
"""

from __future__ import annotations

import functools
import logging
import time

from garmexport.observe.logs import log_event
from garmexport.observe.repeat_limit import RepeatLimiter, repeat_key

THRIFT_LOGGER = "thrift"
REPEAT_WINDOW_S = 60.0
MESSAGE_MAX_CHARS = 1000
log = logging.getLogger("garmexport.hive.thrift")


class _Relay(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._limiter = RepeatLimiter(REPEAT_WINDOW_S)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._relay(record)
        except Exception:  # noqa: BLE001 - logging must never break the thrift call
            self.handleError(record)

    def _relay(self, record: logging.LogRecord) -> None:
        level = logging.WARNING if record.levelno >= logging.ERROR else logging.DEBUG
        if not log.isEnabledFor(level):
            return
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string in a library line
            message = str(record.msg)
        swallowed = self._limiter.admit(repeat_key(record.name, message), time.monotonic())
        if swallowed is None:
            return
        fields: dict[str, object] = {"thrift_logger": record.name, "message": message[:MESSAGE_MAX_CHARS]}
        if swallowed:
            fields["suppressed"] = swallowed
        log_event(log, "thrift_log", level=level, **fields)


@functools.cache
def relay_thrift_logs() -> None:
    """Route the ``thrift`` library's log records through :class:`_Relay` (once)."""
    thrift = logging.getLogger(THRIFT_LOGGER)
    thrift.addHandler(_Relay())
    thrift.propagate = False
    # the relay decides the levels; the records must reach it to be counted
    thrift.setLevel(logging.DEBUG)
