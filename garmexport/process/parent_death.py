"""A reader process dies with its supervisor, however the supervisor ends.

Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` has the kernel send SIGKILL to this process
when its parent ends, a SIGKILL of the parent included (no handler of the parent can do
that). The request is made by the child, after it started: if the parent ended before
that, the signal will never come, so the parent's pid is checked once the request is in
place, and the process exits at once if it is no longer the parent.

SIGKILL rather than SIGTERM: a supervisor that is gone can no longer fold its readers'
health or answer for the instance, and the commit protocol makes a kill at any point safe
(the next start resumes from the output directory).
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
#: exit status when the parent was already gone: as if the kernel had killed us
ORPHAN_EXIT = 128 + signal.SIGKILL


def die_with(parent_pid: int) -> None:
    """Be killed when ``parent_pid`` (our parent) ends; exit now if it already has.
    Raises OSError when the kernel refuses (not Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")
    if os.getppid() != parent_pid:
        os._exit(ORPHAN_EXIT)
