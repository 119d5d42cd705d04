"""Whether an OS process still runs, for tests that kill processes and check what follows."""

from __future__ import annotations

import time
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_gone(pids: list[int], timeout_s: float = 15.0) -> None:
    """Wait until none of ``pids`` runs; AssertionError naming the survivors on timeout."""
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(p) for p in pids):
        assert time.monotonic() < deadline, [p for p in pids if pid_alive(p)]
        time.sleep(0.05)
