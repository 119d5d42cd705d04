"""TEST ONLY: the exporter's crash steps, for :mod:`garmexport.process.crash_hooks`.

``TEST_GARMEXPORT_CRASH_AFTER=<step>:<n>`` makes the process exit at once (as a SIGKILL
would) right after the n-th ``step`` in this process, where ``step`` is one of
:data:`garmexport.protocol.commit_steps.STEPS` (``publish``: a data or quarantine file is final, no
marker knows it yet; ``marker``: a marker is written, older markers and intents not yet
deleted; ...) or a place of :data:`PLACES`; ``<step>:<n>:stop`` stops it there instead
(the zombie of tests/hdfs/test_hdfs_exactly_once.py). The integration tests use it to crash
at those points.
"""

from __future__ import annotations

import os

from garmexport.process.crash_hooks import CRASH_ENV, hook
from garmexport.protocol.commit_steps import STEPS

__all__ = ["CRASH_ENV", "PLACES", "PREDATED_ENV", "crash_at", "crash_point", "predated_types"]

#: A batch waits in its writer actor behind a running job (the actors' thread).
QUEUED = "queued"
#: An executor thread has taken a batch of a job and not yet handled it.
WORKER = "worker"
#: A file's Parquet bytes are encoded in an executor thread; nothing of it is written yet.
ENCODED = "encoded"
#: Every place :func:`crash_at` knows.
PLACES = (QUEUED, WORKER, ENCODED)

#: TEST ONLY: event types (dataset names, comma-separated) this process reads as unknown
#: markers, as a version that predates them reads them: the tests of ``repair quarantine``
#: quarantine a type, then "upgrade" by running without it
PREDATED_ENV = "TEST_GARMEXPORT_UNKNOWN_TYPES"


def crash_point(step: str) -> None:
    """TEST ONLY: act after commit step ``step`` if :data:`CRASH_ENV` asks for it."""
    hook(step, STEPS)


def crash_at(place: str) -> None:
    """TEST ONLY: act at ``place`` (:data:`PLACES`) if :data:`CRASH_ENV` asks for it."""
    hook(place, PLACES)


def predated_types() -> frozenset[str]:
    """TEST ONLY: the dataset names :data:`PREDATED_ENV` lists (none when unset)."""
    return frozenset(t.strip() for t in os.environ.get(PREDATED_ENV, "").split(",") if t.strip())
