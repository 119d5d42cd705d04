"""TEST ONLY: crash the process right after a named commit step.

``TEST_GARMEXPORT_CRASH_AFTER=<step>:<n>`` makes the process exit at once (``os._exit(137)``,
as a SIGKILL would) right after the n-th ``step`` in this process, where ``step`` is one of
:data:`garmexport.protocol.commit_steps.STEPS` (``publish``: a data or quarantine file is final, no
marker knows it yet; ``marker``: a marker is written, older markers and intents not yet
deleted; ...). The integration tests use it to crash at those points. Unset, a crash point
costs one string comparison. ``<step>:<n>:stop`` stops the process instead (SIGSTOP, as a
scheduler pausing it would), so that a test can make it a zombie at a chosen point and
continue it (SIGCONT) once another owner has taken its partitions over.
"""

from __future__ import annotations

import os
import signal
import threading

from garmexport.protocol.commit_steps import STEPS

#: A batch waits in its writer's lane behind another message (reader's thread).
QUEUED = "queued"
#: A pool thread has taken a batch from its lane and not yet handled it.
WORKER = "worker"
#: A file's Parquet bytes are encoded in a pool thread; nothing of it is written yet.
ENCODED = "encoded"
#: Every place :func:`crash_at` knows.
PLACES = (QUEUED, WORKER, ENCODED)

#: TEST ONLY: event types (dataset names, comma-separated) this process reads as unknown
#: markers, as a version that predates them reads them: the tests of ``repair quarantine``
#: quarantine a type, then "upgrade" by running without it
PREDATED_ENV = "TEST_GARMEXPORT_UNKNOWN_TYPES"
CRASH_ENV = "TEST_GARMEXPORT_CRASH_AFTER"  # not GARMEXPORT_*: config rejects unknown ones
_crash_step, _, _crash_rest = os.environ.get(CRASH_ENV, "").partition(":")
_crash_n, _, _crash_action = _crash_rest.partition(":")
if _crash_action not in ("", "stop"):
    raise ValueError(f"{CRASH_ENV}: {_crash_action!r} is not an action (stop, or none to exit)")
_crash_seen = 0
_crash_lock = threading.Lock()  # pool threads reach these points too


def crash_point(step: str) -> None:
    """TEST ONLY: exit the process if :data:`CRASH_ENV` asks for a crash after ``step``."""
    if step not in STEPS:
        raise ValueError(f"{step!r} is not a commit step (garmexport.protocol.commit_steps)")
    if step == _crash_step:
        _count()


def crash_at(place: str) -> None:
    """TEST ONLY: exit the process if :data:`CRASH_ENV` asks for a crash at ``place``."""
    if place not in PLACES:
        raise ValueError(f"{place!r} is not a crash place ({', '.join(PLACES)})")
    if place == _crash_step:
        _count()


def _count() -> None:
    global _crash_seen
    with _crash_lock:
        _crash_seen += 1
        if _crash_seen == int(_crash_n):
            if _crash_action == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)  # returns when continued
            else:
                os._exit(137)


def predated_types() -> frozenset[str]:
    """TEST ONLY: the dataset names :data:`PREDATED_ENV` lists (none when unset)."""
    return frozenset(t.strip() for t in os.environ.get(PREDATED_ENV, "").split(",") if t.strip())
