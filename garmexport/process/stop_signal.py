"""Stop signals: the first asks for a clean stop, a second SIGTERM or SIGINT exits at once
(143 after SIGTERM, 130 after SIGINT: 128 + the signal's number). SIGUSR1 and SIGUSR2 are
the supervisor's clean stops for its readers (:data:`SIBLING_ENDED`,
:data:`INSTANCE_STOPPING`): they ask for the stop and never count toward a forced one.

The actors run in the main thread and thespian's ``listen`` does not return while work
flows, so the reader polls :func:`requested` itself; when ``listen`` does return, the main
loop also sends a stop message (the reader ignores the second one). Exiting at once
is safe at any point: a publish is atomic, and nothing half-written is ever visible.

Before a forced exit (a second signal, or the stop still running past its deadline) the
``on_forced`` callback of :func:`install` is called with why and the exit code, so that
the last log line says the stop was forced and what it abandoned; a callback that fails,
or does not return within :data:`FORCED_REPORT_S`, does not hold up the exit. The deadline
is a Python timer thread, which needs the interpreter lock: a thread that never lets go of
it (a C call that does not release it) would stop the timer too, so the first signal also
arms :mod:`faulthandler`'s watchdog, a C thread that needs no lock, for
:data:`BACKSTOP_S` later; it writes every thread's stack to stderr (what held the stop)
and exits 1.

A reader process (``actors.parallelism`` > 1) is started with these signals blocked
(:func:`blocked`, inherited across the exec) and calls :func:`record` once its arguments are
read: a stop the supervisor forwards while the reader still imports is then a stop request
it honours as soon as it runs, not the default action that killed it (exit 143, which the
supervisor would take for a failed reader).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_requested = threading.Event()
#: how long a forced exit waits for its ``on_forced`` report before exiting without it
FORCED_REPORT_S = 2.0
#: how long past the deadline the watchdog that needs no interpreter lock exits 1 when the
#: deadline's own exit has not come (the report's wait, and a margin)
BACKSTOP_S = FORCED_REPORT_S + 3.0
#: exit code of a second signal: 128 + its number, as a shell reports a process it killed
EXIT_ON_SECOND = {signal.SIGTERM: 143, signal.SIGINT: 130}
#: what a supervisor sends its other readers when one ended on its own: a clean stop like a
#: first SIGTERM, whose reason says so; never a forced one (a repeat is ignored)
SIBLING_ENDED = signal.SIGUSR1
#: what a supervisor sends its readers for the instance's first SIGTERM or SIGINT: the same
#: clean stop, but never counted as a second signal, so that a reader that also got the
#: operator's signal directly (a terminal's Ctrl-C to the process group, a tree kill) is
#: not forced by the two together
INSTANCE_STOPPING = signal.SIGUSR2
#: the stops that never force, and the reason each gives
_NOT_FORCING = {SIBLING_ENDED: "another reader of the instance ended (the supervisor's "
                               "reader_exited line says which and how)",
                INSTANCE_STOPPING: "signal"}
#: the signals a reader starts with blocked (:func:`blocked`) and this module handles
_HANDLED = (*EXIT_ON_SECOND, *_NOT_FORCING)
_why = ["signal"]
#: SIGTERMs and SIGINTs received: the second forces the stop (the supervisor's stops never
#: count, whichever order Python runs the handlers of signals that arrived together in)
_direct = [0]


def why() -> str:
    """The reason of the stop request: ``signal``, or that another reader of the instance
    ended (:data:`SIBLING_ENDED`)."""
    return _why[0]


def _second(signum: int) -> bool:
    """Count ``signum``; whether it is the second SIGTERM or SIGINT (a forced stop)."""
    if signum in _NOT_FORCING:
        return False
    _direct[0] += 1
    return _direct[0] >= 2


def _first(signum: int) -> None:
    _why[0] = _NOT_FORCING.get(signum, "signal")
    _requested.set()


def requested() -> bool:
    return _requested.is_set()


def request() -> None:
    _requested.set()


@contextmanager
def blocked() -> Iterator[None]:
    """The stop signals (SIGTERM, SIGINT and the supervisor's SIGUSR1 and SIGUSR2) held back
    (pending) in this thread while the block runs, and in every process started meanwhile,
    which inherits the mask until :func:`record`."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def record() -> None:
    """Until :func:`install`: a first stop signal only asks for the stop, a second SIGTERM or
    SIGINT exits at once with its code. Then unblocks them, so that one held back by
    :func:`blocked` is delivered now."""

    def handle(signum: int, frame: object) -> None:
        if _second(signum):
            os._exit(EXIT_ON_SECOND[signum])
        if not _requested.is_set():
            _first(signum)

    for signum in _HANDLED:
        signal.signal(signum, handle)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)


def install(hard_deadline_s: float,
            on_forced: Callable[[str, int], None] = lambda why, code: None) -> None:
    """Handle the stop signals; after the first, exit 1 if still alive past the deadline; on
    a second SIGTERM or SIGINT, exit at once.
    ``on_forced(why, exit_code)`` runs just before a forced exit (in the signal handler, or
    in the deadline's timer thread)."""

    def forced(why: str, code: int) -> None:
        def report() -> None:
            try:
                on_forced(why, code)
            except BaseException:  # noqa: BLE001 - the exit must happen whatever it does
                pass

        # in a thread of its own, waited for a while: a stop that hangs may hold a lock the
        # report needs (a log handler's), and the exit must come all the same
        reporter = threading.Thread(target=report, name="stop-forced-report", daemon=True)
        reporter.start()
        reporter.join(FORCED_REPORT_S)
        os._exit(code)

    def deadline() -> None:
        timer = threading.Timer(
            hard_deadline_s, forced, (f"stop still running after {hard_deadline_s:g} s", 1))
        timer.daemon = True
        timer.start()
        # the backstop: stderr may be gone (a closed pipe); the timer's exit stands alone
        try:
            faulthandler.dump_traceback_later(hard_deadline_s + BACKSTOP_S, exit=True,
                                              file=sys.stderr)
        except (ValueError, OSError, AttributeError, RuntimeError):
            pass

    def handle(signum: int, frame: object) -> None:
        if _second(signum):
            forced(f"second {signal.Signals(signum).name}", EXIT_ON_SECOND[signum])
        if not _requested.is_set():
            _first(signum)
            deadline()

    for signum in _HANDLED:
        signal.signal(signum, handle)
    if _requested.is_set():  # asked before this (:func:`record`): the deadline runs from now
        deadline()


def reset() -> None:
    """Forget an earlier request (tests running several exports in one process)."""
    _requested.clear()
    _why[0] = "signal"
    _direct[0] = 0
    faulthandler.cancel_dump_traceback_later()
