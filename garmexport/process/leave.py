"""Ending the ``garmexport`` process without the native teardown that can abort it.

A command that read or wrote Parquet leaves Arrow's C++ thread pools behind. When the
interpreter finalizes, the C++ runtime destroys them; a worker thread still joinable at that
moment makes ``std::thread``'s destructor call ``std::terminate``: the process prints
``terminate called without an active exception`` and dies of SIGABRT *after* its work is
done and its report printed (apache/arrow issue 34314; seen once in a CI run of
``garmexport verify``, whose exit status 1 became -6). A script that checks the status then
sees a crash where there was a finding, or a success.

:func:`leave` does what a normal exit does that matters to us, in the same order (wait for
non-daemon threads, run the ``atexit`` handlers, which include ``logging.shutdown`` and
multiprocessing's reaping of children, flush the standard streams) and then ends the
process with :func:`os._exit`, which skips the C++ static destructors.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import NoReturn


def leave(code: int) -> NoReturn:
    """End the process with exit status ``code`` after the interpreter's own shutdown steps,
    but without its native teardown."""
    current = threading.current_thread()
    for thread in threading.enumerate():  # as the interpreter does before its atexit step
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # noqa: SLF001 - the interpreter's own exit step, run once here
    gc.collect()  # file objects only the collector can reach are closed, hence flushed
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or a closed stream: nothing to flush to
            pass
    os._exit(code)
