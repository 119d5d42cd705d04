"""Run one call in a forked child, so that what it imports never weighs on this process.

The supervisor of an instance's readers needs the JVM takeover once at start, and that
step imports pyarrow, numpy and confluent-kafka: 52 MB of RSS (18 MB anonymous) that the
supervisor would then carry for its whole life, next to readers that map the same
libraries (DESIGN.md 9.10). In a child they are gone when it exits.

Invariants: the call's outcome is the caller's, as if it ran here: its exception is raised
in the parent (pickled through a pipe; one that does not pickle comes back as a
:class:`ChildFailed` with its text), and a child that died without a word (killed) raises
:class:`ChildFailed` too. Its return value is not kept. To be called only while this
process has no other thread (fork copies one thread, and no lock another one holds).
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from collections.abc import Callable

from garmexport.errors import GarmexportError

_OK = b"ok"


class ChildFailed(GarmexportError):
    """The child ended without finishing the call, or with an exception that does not pickle."""


def call_in_child(fn: Callable[..., object], *args: object) -> None:
    """``fn(*args)`` in a forked child; its exception, if any, is raised here."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        os.close(read_end)
        _run_and_exit(write_end, fn, args)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        outcome = pipe.read()
    _, status = os.waitpid(pid, 0)
    if outcome == _OK:
        return
    if not outcome:
        raise ChildFailed(f"{getattr(fn, '__name__', fn)} ended without an outcome "
                          f"(exit status {os.waitstatus_to_exitcode(status)})")
    raise pickle.loads(outcome)


def _run_and_exit(write_end: int, fn: Callable[..., object], args: tuple) -> None:
    code = 0
    try:
        try:
            fn(*args)
            outcome = _OK
        except BaseException as exc:  # noqa: BLE001 - every outcome goes to the parent
            code = 1
            try:
                outcome = pickle.dumps(exc)
            except Exception:  # noqa: BLE001
                outcome = pickle.dumps(ChildFailed(f"{type(exc).__name__}: {exc}"))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(outcome)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)  # no atexit hooks, no buffers of the parent flushed twice
