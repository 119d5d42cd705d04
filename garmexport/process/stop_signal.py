"""SIGTERM/SIGINT handling: the first asks for a clean stop, the second exits at once
(143 after SIGTERM, 130 after SIGINT: 128 + the signal's number).

The actors run in the main thread and thespian's ``listen`` does not return while work
flows, so the reader polls :func:`requested` itself; when ``listen`` does return, the main
loop also sends a stop message (the reader ignores the second one). Exiting at once
is safe at any point: a publish is atomic, and nothing half-written is ever visible.

Before a forced exit (a second signal, or the stop still running past its deadline) the
``on_forced`` callback of :func:`install` is called with why and the exit code, so that
the last log line says the stop was forced and what it abandoned; a callback that fails
does not hold up the exit.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

_requested = threading.Event()
#: exit code of a second signal: 128 + its number, as a shell reports a process it killed
EXIT_ON_SECOND = {signal.SIGTERM: 143, signal.SIGINT: 130}


def requested() -> bool:
    return _requested.is_set()


def request() -> None:
    _requested.set()


def install(hard_deadline_s: float,
            on_forced: Callable[[str, int], None] = lambda why, code: None) -> None:
    """Handle SIGTERM and SIGINT; after the first, exit 1 if still alive past the deadline.
    ``on_forced(why, exit_code)`` runs just before a forced exit (in the signal handler, or
    in the deadline's timer thread)."""

    def forced(why: str, code: int) -> None:
        try:
            on_forced(why, code)
        except BaseException:  # noqa: BLE001 - the exit must happen whatever the report does
            pass
        os._exit(code)

    def handle(signum: int, frame: object) -> None:
        if _requested.is_set():
            forced(f"second {signal.Signals(signum).name}", EXIT_ON_SECOND[signum])
        _requested.set()
        timer = threading.Timer(
            hard_deadline_s, forced, (f"stop still running after {hard_deadline_s:g} s", 1))
        timer.daemon = True
        timer.start()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def reset() -> None:
    """Forget an earlier request (tests running several exports in one process)."""
    _requested.clear()
