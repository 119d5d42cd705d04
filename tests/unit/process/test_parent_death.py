"""A process that asked to die with its parent does, even when the parent is SIGKILLed,
and exits at once if its parent was gone before it asked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from garmexport.process.parent_death import ORPHAN_EXIT
from tests.processes import pid_alive, wait_gone

CHILD = textwrap.dedent("""
    import os, sys, time
    from garmexport.process.parent_death import die_with
    die_with(int(sys.argv[1]))
    print(os.getpid(), flush=True)
    time.sleep(120)
""")
PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())])
    time.sleep(120)
""")


def test_the_child_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    out = tmp_path / "child.pid"
    with open(out, "w") as sink:
        parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD], stdout=sink)
    try:
        deadline = time.monotonic() + 60
        while not out.read_text().strip():
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.05)
        child = int(out.read_text())
        assert pid_alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_gone([child], timeout_s=10)  # the child does not outlive its parent
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_child_whose_parent_is_already_gone_exits_at_once() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(os.getpid() + 10**6)], timeout=60,
                          capture_output=True)
    assert done.returncode == ORPHAN_EXIT and done.stdout == b""
