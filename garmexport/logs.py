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
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import re
import sys
from collections.abc import Mapping
from typing import IO, Any

from garmexport.config import shown

FORMATS = ("text", "json")
_PLAIN = re.compile(r"^[^\s\"=\\]+$")
_FIELDS = "garmexport_fields"


def redact(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``fields`` with secret-named values (at any depth of mappings) masked.
    What counts as a secret is the configuration's rule (:func:`garmexport.config.is_secret`),
    so logs and ``garmexport config`` never disagree."""
    return {key: shown(str(key), redact(value) if isinstance(value, Mapping) else value)
            for key, value in fields.items()}


def log_event(logger: logging.Logger, event: str, *, level: int = logging.INFO,
              **fields: Any) -> None:
    """Log ``event`` (a snake_case name, the greppable part) with ``fields`` as key=value.
    ``level`` is reserved: a field cannot be called ``level``."""
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={_FIELDS: fields})


def _quote(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, (Mapping, list, tuple)):
        text = json.dumps(value, default=str)
    else:
        text = str(value)
    return text if _PLAIN.match(text) else json.dumps(text)


def _parts(record: logging.LogRecord) -> tuple[str, dict[str, Any]]:
    """The event name and its redacted fields (plus ``exc`` if the record carries one)."""
    fields = redact(getattr(record, _FIELDS, {}))
    if record.exc_info:
        fields["exc"] = logging.Formatter().formatException(record.exc_info)
    return record.getMessage(), fields


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


def configure(fmt: str = "text", level: str | int = "INFO", stream: IO[str] | None = None) -> None:
    """Send every record of the process to ``stream`` (stderr by default) in ``fmt``.
    Replaces handlers installed by an earlier call; raises ValueError on an unknown format
    or level name."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {FORMATS}")
    if isinstance(level, str) and not isinstance(logging.getLevelName(level.upper()), int):
        raise ValueError(f"unknown log level {level!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(TextFormatter() if fmt == "text" else JsonFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_garmexport", False)]:
        root.removeHandler(old)
    handler._garmexport = True  # type: ignore[attr-defined]  # marks ours for replacement
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
