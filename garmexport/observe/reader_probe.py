"""How the supervisor reaches its readers: a GET on each reader's private loopback port.

Each reader (``actors.parallelism`` > 1) serves its own ``/metrics`` and ``/health/*`` on
127.0.0.1 and writes the port to a file (``metrics.port_file``); the supervisor reads that
file and asks. An answer is never an exception: a reader not serving yet, refusing, or
silent past the timeout (stopped, or stuck) is an :class:`Answer` with ``status`` None and
the reason.

A reader that stopped answering (stuck, or stopped with SIGSTOP) is marked silent by the
supervisor's watch (:mod:`garmexport.observe.reader_watch`), which keeps asking it in the
background: while it is marked, a scrape or a health check gets its no-answer at once
instead of waiting :data:`PROBE_TIMEOUT_S` for it. The probe keeps when each reader last
answered (:meth:`ReaderProbe.last_answer`): the instance's liveness gives a silent reader
the same live timeout a reader gives its own loop (:mod:`garmexport.observe.health_fold`).
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from garmexport.observe.health import read_port_file

#: a reader answers in milliseconds; one that takes this long counts as not answering
PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Answer:
    """One reader's answer to one GET: HTTP ``status`` and ``body``, or ``status`` None
    and ``error`` when there was no answer."""

    reader: str
    status: int | None
    body: bytes = b""
    error: str = ""
    #: False while the reader has not said where it serves (it is starting, or failed to)
    serving: bool = True


class ReaderProbe:
    """GETs on the readers named in ``port_files`` (reader name -> its port file)."""

    def __init__(self, port_files: Mapping[str, str], timeout_s: float = PROBE_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._port_files = dict(port_files)
        self._timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        #: reader -> (monotonic time it was last heard, why it is silent now)
        self._silent: dict[str, tuple[float, str]] = {}
        #: reader -> monotonic time (``clock``) of its last answer, whoever asked
        self._answered: dict[str, float] = {}

    @property
    def readers(self) -> list[str]:
        return list(self._port_files)

    def mark_silent(self, reader: str, since: float, error: str) -> None:
        """``reader`` has not answered since ``since`` (monotonic seconds): answer for it at
        once, without asking, until :meth:`mark_answering`."""
        with self._lock:
            self._silent[reader] = (since, error)

    def mark_answering(self, reader: str) -> None:
        with self._lock:
            self._silent.pop(reader, None)

    def last_answer(self, reader: str) -> float | None:
        """When ``reader`` last answered a GET (``clock`` seconds), None before its first."""
        with self._lock:
            return self._answered.get(reader)

    def _heard(self, answer: Answer) -> Answer:
        with self._lock:
            self._answered[answer.reader] = self._clock()
        return answer

    def get(self, reader: str, path: str, ask_silent: bool = False) -> Answer:
        """``reader``'s answer to a GET of ``path``; for a reader marked silent, its
        no-answer at once (``ask_silent``: ask it all the same, as the watch does)."""
        with self._lock:
            silent = None if ask_silent else self._silent.get(reader)
        if silent is not None:
            return Answer(reader, None, error=f"not answering for "
                          f"{self._clock() - silent[0]:.0f}s: {silent[1]}")
        port = read_port_file(self._port_files[reader])
        if port is None:
            return Answer(reader, None, error="not serving yet", serving=False)
        url = f"http://127.0.0.1:{port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=self._timeout_s) as answer:
                return self._heard(Answer(reader, answer.status, answer.read()))
        except urllib.error.HTTPError as exc:
            return self._heard(Answer(reader, exc.code, exc.read()))
        except (OSError, ValueError) as exc:  # refused, reset, timed out
            return Answer(reader, None, error=f"not answering: {type(exc).__name__}: {exc}")

    def get_all(self, path: str) -> list[Answer]:
        """One answer per reader, in reader order."""
        return [self.get(reader, path) for reader in self._port_files]
