"""glibc's malloc in an exporter process: two arenas, and freed pages handed back.

Most of an exporter's memory goes through the C library's malloc: the decoded Arrow rows
(ptars builds them with it, and Arrow's pool is the system one, ``run_export``), librdkafka's
pre-fetched messages, upb, zstd and the Parquet encoder. glibc gives each thread that meets
a locked arena an arena of its own (up to 8 per CPU) and keeps the pages freed in them: in
the 1M catch-up a 2-reader instance's readers held 58-141 MB each of freed malloc memory at
their peak (``mallinfo2``, DESIGN.md 9.10). Two arenas per process and a ``malloc_trim``
every half second took 25-40 MB off the instance's peak, CPU per event within the noise.

Invariants: an operator who tunes malloc is left alone (``MALLOC_ARENA_MAX`` or any
``glibc.malloc.*`` tunable in ``GLIBC_TUNABLES``: no limit and no trimming here); the
limit is set before any thread but the main one has allocated (glibc reads it when a
thread needs an arena, and arenas made before stay), so it is called first thing in the
exporter process; without glibc (no ``mallopt``) both are no-ops.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Mapping

M_ARENA_MAX = -8  # <malloc.h>
ARENAS = 2
TRIM_EVERY_S = 0.5
THREAD_NAME = "malloc-trim"


def _libc() -> ctypes.CDLL | None:
    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether to tune malloc here: not when the operator tunes it for glibc."""
    return "MALLOC_ARENA_MAX" not in environ and \
        "glibc.malloc." not in environ.get("GLIBC_TUNABLES", "")


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc arenas in this process; True when the limit was set."""
    libc = _libc()
    return libc is not None and bool(libc.mallopt(M_ARENA_MAX, arenas))


def trim_once() -> None:
    """Hand the free pages of every arena back to the kernel."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def start_trimming(every_s: float = TRIM_EVERY_S) -> threading.Thread | None:
    """A daemon thread that trims every ``every_s`` seconds for the process's life; None
    without glibc."""
    libc = _libc()
    if libc is None:
        return None

    def trim() -> None:
        while True:
            time.sleep(every_s)
            libc.malloc_trim(0)  # ctypes releases the GIL for the call

    thread = threading.Thread(target=trim, name=THREAD_NAME, daemon=True)
    thread.start()
    return thread
