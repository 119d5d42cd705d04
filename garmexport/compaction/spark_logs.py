"""What the Spark driver JVM prints, turned into garmexport log lines.

``garmexport compact`` starts the JVM itself (pyspark's ``launch_gateway``) with its
stdout and stderr on a pipe, and a thread reads it (:class:`JvmRelay`):

- the JVM's log4j2 writes one JSON object per record (``log4j2-spark.properties`` in this
  package, passed with ``-Dlog4j2.configurationFile``); each becomes the garmexport event
  ``spark_log`` (fields ``jvm_logger``, ``message``, ``exc``) at the record's level, so it
  comes out in ``log.format`` like every other line;
- anything else the JVM prints (the JVM's own ``WARNING: Using incubator modules``, a crash
  before logging starts) becomes ``jvm_output`` (field ``line``): WARNING for lines the JVM
  marks ``WARNING:``, ERROR otherwise.

The threshold is ``compaction.spark_log_level`` (``--spark-log-level``), ERROR by default:
Spark and Hive log dozens of harmless WARN lines per run ("HiveConf of name ... does not
exist", "Namespace ... created concurrently", "Unable to load native-hadoop library").
It applies to the JVM's log4j2, to ``jvm_output`` lines and to py4j's Python logger.
Spark's console progress bar is off unless ``spark.ui.showConsoleProgress`` is given.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import IO, Any

from garmexport.observe.logs import log_event

LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
CONFIG_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "log4j2-spark.properties")
_PY_LEVELS = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR,
              "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG,
              "TRACE": logging.DEBUG}
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
log = logging.getLogger(__name__)


def session_conf(conf: Mapping[str, str], level: str) -> dict[str, str]:
    """``conf`` plus the settings that route the driver's logs through :class:`JvmRelay`
    at ``level``; a log4j2 configuration or progress setting given in ``conf`` wins."""
    out = dict(conf)
    java = out.get(_JAVA_OPTIONS, "")
    if "log4j2.configurationFile" not in java:
        path = f'"{CONFIG_FILE}"' if " " in CONFIG_FILE else CONFIG_FILE
        ours = f"-Dlog4j2.configurationFile={path} -Dgarmexport.spark.level={level}"
        out[_JAVA_OPTIONS] = f"{java} {ours}".strip()
    out.setdefault("spark.ui.showConsoleProgress", "false")
    return out


def set_python_levels(level: str) -> None:
    """The relay's logger and py4j's follow the Spark threshold (py4j logs every closed
    connection at INFO)."""
    log.setLevel(_PY_LEVELS[level])
    logging.getLogger("py4j").setLevel(max(_PY_LEVELS[level], logging.WARNING)
                                       if level not in ("INFO", "DEBUG", "TRACE")
                                       else _PY_LEVELS[level])


def relay_line(line: str) -> None:
    """Log one line the JVM printed (see the module docstring)."""
    text = line.rstrip("\r\n")
    if not text.strip():
        return
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "level" in doc and "message" in doc:
        fields: dict[str, Any] = {"jvm_logger": doc.get("logger", ""),
                                  "message": doc["message"]}
        if doc.get("exc"):
            fields["exc"] = doc["exc"]
        log_event(log, "spark_log", level=_PY_LEVELS.get(str(doc["level"]).upper(),
                                                         logging.ERROR), **fields)
        return
    level = logging.WARNING if text.lstrip("\r").startswith("WARNING:") else logging.ERROR
    log_event(log, "jvm_output", level=level, line=text.lstrip("\r"))


class JvmRelay:
    """A pipe for the JVM's stdout and stderr, read line by line by a daemon thread."""

    def __init__(self) -> None:
        read_fd, self._write_fd = os.pipe()
        self._reader: IO[str] = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(target=self._run, name="jvm-output", daemon=True)
        self._thread.start()

    def popen_kwargs(self) -> dict[str, Any]:
        return {"stdout": self._write_fd, "stderr": self._write_fd}

    def started(self) -> None:
        """Call once the JVM holds the pipe: the relay ends when the JVM closes it."""
        os.close(self._write_fd)

    def _run(self) -> None:
        for line in self._reader:
            try:
                relay_line(line)
            except Exception:  # noqa: BLE001 - never let a log line kill the relay
                pass


def launch_jvm(settings: Mapping[str, str]) -> Any:
    """Start the driver JVM with ``settings`` and its output relayed; a SparkContext.

    Does nothing (returns None) when this process already has a JVM: pyspark keeps one
    gateway per process.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return None
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    relay = JvmRelay()
    try:
        gateway = launch_gateway(conf, popen_kwargs=relay.popen_kwargs())
    finally:
        relay.started()
    return SparkContext(conf=conf, gateway=gateway)
