"""leave(): the process ends with the status asked for, after what a normal exit does."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    from garmexport.process.leave import leave

    def late():
        time.sleep(0.3)
        print("thread finished", flush=True)

    threading.Thread(target=late).start()
    atexit.register(lambda: print("atexit ran"))
    sys.stderr.write("unflushed on stderr")
    print("unflushed on stdout", end="")
    leave(7)
    print("after leave")  # never reached
""")


def test_leave_waits_for_threads_runs_atexit_flushes_and_exits_with_the_status() -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 7, done.stderr
    # the thread ends before the atexit handlers run, as in the interpreter's own exit
    assert done.stdout == "unflushed on stdoutthread finished\natexit ran\n", done.stdout
    assert done.stderr == "unflushed on stderr", done.stderr


def test_the_command_ends_through_leave_with_the_status_of_main() -> None:
    """``garmexport`` and ``python -m garmexport`` enter through ``entry``, which hands the
    status of the command to leave()."""
    script = ("import sys; from garmexport.cli import main as m\n"
              "real = m.leave\n"
              "m.leave = lambda code: (print('leave', code, flush=True), real(code))\n"
              "sys.argv = ['garmexport', 'config']\n"
              "m.entry()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("leave 0\n") and "[source]" in done.stdout, done.stdout
