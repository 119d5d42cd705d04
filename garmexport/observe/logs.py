"""Logging setup: one line per significant event, as text or JSON, with key=value fields.

Call :func:`configure` once at start, then ``log_event(log, "file_published", type="fs",
partition=3, rows=1200)``. Text lines read
``2026-11-02T10:00:00.123Z INFO garmexport.flush file_published type=fs partition=3 rows=1200``
so ``grep 'event=..'`` is not needed: ``grep file_published`` and ``grep partition=3`` work.
JSON lines carry the same keys (``ts``, ``level``, ``logger``, ``event`` and the fields).

Invariants:

- One record is one line: values with spaces, quotes, ``=`` or newlines are JSON-quoted,
  and a traceback becomes one quoted ``exc=`` field.
- Secrets never reach a line: a field (or a key of a nested mapping, such as the Kafka
  client settings) that the configuration calls a secret is replaced by ``***``.
- Everything the process would print as a log goes through the configured handler: Python
  warnings (``py.warnings``) and uncaught exceptions, in the main thread or another one
  (``uncaught_exception``, ERROR, with the traceback as ``exc``), so with
  ``log.format = "json"`` every line on stderr is JSON. (librdkafka's lines come through
  :mod:`garmexport.kafka.client_callbacks`.)
- DEBUG stays bounded: a field of a DEBUG line is cut to ``DEBUG_FIELD_MAX_CHARS``, and the
  actor library (logger ``Thespian``, which logs every actor message in full at DEBUG) has
  a level of its own, ``log.actor_level``, WARNING unless asked.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import re
import sys
import threading
import traceback
from collections.abc import Mapping
from typing import IO, Any

from garmexport.settings.config import shown

FORMATS = ("text", "json")
ACTOR_LOGGER = "Thespian"
DEBUG_FIELD_MAX_CHARS = 300
_PLAIN = re.compile(r"^[^\s\"=\\]+$")
_FIELDS = "garmexport_fields"


def redact(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``fields`` with secret-named values (at any depth of mappings) masked.
    What counts as a secret is the configuration's rule (:func:`garmexport.settings.config.is_secret`),
    so logs and ``garmexport config`` never disagree."""
    return {key: shown(str(key), redact(value) if isinstance(value, Mapping) else value)
            for key, value in fields.items()}


def log_event(logger: logging.Logger, event: str, *, level: int = logging.INFO,
              **fields: Any) -> None:
    """Log ``event`` (a snake_case name, the greppable part) with ``fields`` as key=value.
    ``level`` is reserved: a field cannot be called ``level``."""
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={_FIELDS: fields})


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, default=str)
    return str(value)


def _quote(value: Any) -> str:
    text = _text(value)
    return text if _PLAIN.match(text) else json.dumps(text)


def _parts(record: logging.LogRecord) -> tuple[str, dict[str, Any]]:
    """The event name and its redacted fields (plus ``exc`` if the record carries one)."""
    fields = redact(getattr(record, _FIELDS, {}))
    event = record.getMessage()
    if record.levelno < logging.INFO:
        event = _cut(event)
        fields = {key: _cut(value) for key, value in fields.items()}
    if record.exc_info:
        fields["exc"] = _exception_text(record.exc_info)
    return event, fields


def _exception_text(exc_info: Any) -> str:
    """The traceback as text; never raises. Some values are not exceptions the traceback
    module can walk (librdkafka's ``KafkaError`` carried as an exception's value has no
    ``__suppress_context__``): then their type, text and the frames alone, so that the line
    is still one line of the configured format rather than a logging error on stderr."""
    try:
        return logging.Formatter().formatException(exc_info)
    except Exception:  # noqa: BLE001 - a log line must not fail on what it reports
        kind, value, tb = exc_info
        frames = "".join(traceback.format_tb(tb)) if tb is not None else ""
        return f"Traceback (most recent call last):\n{frames}{getattr(kind, '__name__', kind)}: {value}"


def _cut(value: Any) -> Any:
    """``value``, or its text cut to DEBUG_FIELD_MAX_CHARS with the number of chars left out."""
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    text = _text(value)
    if len(text) <= DEBUG_FIELD_MAX_CHARS:
        return value
    return f"{text[:DEBUG_FIELD_MAX_CHARS]}...(+{len(text) - DEBUG_FIELD_MAX_CHARS} chars)"


def _timestamp(record: logging.LogRecord) -> str:
    when = _dt.datetime.fromtimestamp(record.created, _dt.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    """``<ts> <LEVEL> <logger> <event> k=v ...`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        event, fields = _parts(record)
        head = [_timestamp(record), record.levelname, record.name, _quote(event)]
        return " ".join(head + [f"{key}={_quote(value)}" for key, value in fields.items()])


class JsonFormatter(logging.Formatter):
    """One JSON object per line; fields sit beside ``ts``/``level``/``logger``/``event``,
    and a field named like one of those gets a trailing ``_`` instead of replacing it."""

    def format(self, record: logging.LogRecord) -> str:
        event, fields = _parts(record)
        line: dict[str, Any] = {"ts": _timestamp(record), "level": record.levelname,
                                "logger": record.name, "event": event}
        for key, value in fields.items():
            line[key + "_" if key in line else key] = value
        return json.dumps(line, default=str)


_format = "text"


def progress(command: str, text: str) -> None:
    """One progress line of a long command on stderr: ``<command>: <text>`` in the text
    format, a ``progress`` event of logger ``garmexport.<command>`` in the JSON one (so that
    every line on stderr is JSON there)."""
    if _format == "json":
        log_event(logging.getLogger(f"garmexport.{command}"), "progress", text=text)
    else:
        print(f"{command}: {text}", file=sys.stderr, flush=True)


class _Fields(logging.Filter):
    """Adds the same fields to every record (the ``reader`` of an instance's readers)."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        super().__init__()
        self._fields = dict(fields)

    def filter(self, record: logging.LogRecord) -> bool:
        setattr(record, _FIELDS, {**self._fields, **getattr(record, _FIELDS, {})})
        return True


def configure(fmt: str = "text", level: str | int = "INFO", stream: IO[str] | None = None,
              actor_level: str | int = "WARNING", fields: Mapping[str, Any] | None = None) -> None:
    """Send every record of the process to ``stream`` (stderr by default) in ``fmt``, at
    ``level``, the actor library's at ``actor_level`` (never below ``level``); ``fields``
    lead the fields of every line (a supervisor's readers share one stream, and each line
    names its ``reader``).
    Replaces handlers installed by an earlier call; raises ValueError on an unknown format
    or level name (level names are case-insensitive)."""
    global _format
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {FORMATS}")
    _format = fmt
    for name in (level, actor_level):
        if isinstance(name, str) and not isinstance(logging.getLevelName(name.upper()), int):
            raise ValueError(f"unknown log level {name!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(TextFormatter() if fmt == "text" else JsonFormatter())
    if fields:
        handler.addFilter(_Fields(fields))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_garmexport", False)]:
        root.removeHandler(old)
    handler._garmexport = True  # type: ignore[attr-defined]  # marks ours for replacement
    root.addHandler(handler)
    root.setLevel(_number(level))
    logging.getLogger(ACTOR_LOGGER).setLevel(max(_number(level), _number(actor_level)))
    logging.captureWarnings(True)
    sys.excepthook = _uncaught
    threading.excepthook = _uncaught_in_thread


def _uncaught(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    logging.getLogger("garmexport").error("uncaught_exception", exc_info=(kind, exc, tb))


def _uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit or args.exc_value is None:
        return
    logging.getLogger("garmexport").error(
        "uncaught_exception", exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        extra={_FIELDS: {"thread": getattr(args.thread, "name", "")}})


def _number(level: str | int) -> int:
    return logging.getLevelName(level.upper()) if isinstance(level, str) else level
