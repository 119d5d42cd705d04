"""SIGTERM, SIGINT and the supervisor's SIGUSR1, in real processes (a handler installed in
the test process would replace the test runner's own)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from garmexport.process import stop_signal

_CHILD = """
import os, signal, sys, time
from garmexport.process import stop_signal
time.sleep(float(sys.argv[1]))  # the signals sent meanwhile wait, blocked
stop_signal.record()
for name in sys.argv[2:]:
    os.kill(os.getpid(), getattr(signal, name))
    time.sleep(0.05)
print(stop_signal.requested(), stop_signal.why(), flush=True)
"""


def _run(*args: str, blocked: bool = False, send: int | None = None) -> tuple[int, str]:
    command = [sys.executable, "-c", _CHILD, *args]
    if blocked:
        with stop_signal.blocked():
            child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    else:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    if send is not None:
        time.sleep(0.1)  # inside the child's sleep, before record()
        child.send_signal(send)
    out, _ = child.communicate(timeout=30)
    return child.returncode, out.strip()


def test_a_stop_sent_before_the_handler_waits_for_it_when_started_blocked() -> None:
    assert _run("1.0", blocked=True, send=signal.SIGTERM) == (0, "True signal")
    # what happened before: the default action killed the process
    assert _run("1.0", send=signal.SIGTERM)[0] == -signal.SIGTERM


def test_the_mask_of_the_starting_thread_is_given_back() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with stop_signal.blocked():
        assert signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_a_sibling_ended_stop_says_so_and_is_never_forced() -> None:
    code, out = _run("0", "SIGUSR1", "SIGUSR1")
    assert code == 0 and out.startswith("True another reader of the instance ended"), out
    # only a second SIGTERM or SIGINT forces: the supervisor's stop never counts
    assert _run("0", "SIGUSR1", "SIGTERM")[0] == 0
    assert _run("0", "SIGUSR1", "SIGTERM", "SIGTERM")[0] == 143
    assert _run("0", "SIGTERM", "SIGINT")[0] == 130


def test_the_supervisors_stop_and_the_operators_signal_together_are_one_stop() -> None:
    # a group kill reaches a reader directly and through its supervisor (SIGUSR2), and
    # Python runs the handlers of signals that arrived together by number (SIGUSR2 first):
    # in either order, one clean stop, not a forced one
    assert _run("0", "SIGTERM", "SIGUSR2") == (0, "True signal")
    assert _run("0", "SIGUSR2", "SIGINT") == (0, "True signal")
    assert _run("0", "SIGUSR2", "SIGINT", "SIGINT")[0] == 130
    assert _run("0", "SIGUSR2", "SIGUSR2") == (0, "True signal")
    assert _run("0") == (0, "False signal")


_HUNG = """
import sys, threading, time
from garmexport.process import stop_signal
held = threading.Lock()
held.acquire()  # as a stop hung while holding the lock its report needs
stop_signal.install(float(sys.argv[1]), lambda why, code: held.acquire())
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_a_stop_past_its_deadline_exits_even_when_its_report_hangs() -> None:
    """The deadline's exit (1) comes FORCED_REPORT_S after the deadline at most, whatever the
    report waits for: before, a report blocked on a lock the hung stop held kept the
    process alive for good (an exporter that never stopped after SIGTERM in a CI run)."""
    child = subprocess.Popen([sys.executable, "-c", _HUNG, "0.5"], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    with child.stdout:
        assert child.stdout.readline().strip() == "ready"
        started = time.monotonic()
        child.send_signal(signal.SIGTERM)
        try:
            assert child.wait(timeout=15) == 1
        finally:
            child.kill()
            child.wait()
    assert time.monotonic() - started < 0.5 + stop_signal.FORCED_REPORT_S + 5


_HOLDS_THE_LOCK = """
import os, re, signal, sys, time
from garmexport.process import stop_signal
stop_signal.install(float(sys.argv[1]))
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.2)  # the handler runs: the stop is asked for, its deadline armed
print("stopping", flush=True)
# a C call that never releases the interpreter lock for the rest of the process's life
# (backtracking without end): the deadline's timer thread can never run
re.match(r"(a+)+$", "a" * 64 + "b")
"""


def test_a_stop_past_its_deadline_exits_even_when_a_thread_never_lets_go_of_the_interpreter(
        ) -> None:
    """The watchdog that needs no interpreter lock exits 1 BACKSTOP_S after the deadline,
    with every thread's stack on stderr: the deadline's own timer is a Python thread, which
    a main thread stuck in such a C call starves for good."""
    child = subprocess.Popen([sys.executable, "-c", _HOLDS_THE_LOCK, "0.5"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    try:
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 1 and out.strip() == "stopping", (child.returncode, out, err)
    assert "most recent call first" in err and "<string>" in err, err
    assert time.monotonic() - started < 0.5 + stop_signal.BACKSTOP_S + 10
