"""The one crash hook: exit at the n-th step, stop and go on, stop then exit, every step."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from garmexport.process.crash_hooks import CRASH_ENV, PAUSE_AT_EVERY_STEP, Spec, parse

STEPS = ("a", "b")
#: a process that reaches a, b, a, b and prints after each step
WALK = ("from garmexport.process.crash_hooks import hook\n"
        "for step in 'abab':\n"
        "    hook(step, ('a', 'b')); print(step, flush=True)\n")


def walk(value: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WALK], env={**os.environ, CRASH_ENV: value},
                            stdout=subprocess.PIPE, text=True)


def wait_stopped(proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        assert time.monotonic() < deadline and proc.poll() is None, "never stopped"
        time.sleep(0.02)


def test_a_spec_names_step_count_and_action_and_a_bad_one_names_the_variable() -> None:
    assert parse("publish") == Spec("publish", 1, "exit")
    assert parse("intent:3:stop") == Spec("intent", 3, "stop")
    assert parse(PAUSE_AT_EVERY_STEP) == Spec("*", None, "stop")
    for bad in ("publish:x", "publish:1:halt", ":1"):
        with pytest.raises(ValueError, match=CRASH_ENV):
            parse(bad)


def test_the_nth_time_a_step_is_reached_exits_like_a_kill() -> None:
    proc = walk("a:2")
    out, _ = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (137, "a\nb\n")  # a, b, then the second a exits


def test_stop_goes_on_once_continued_and_stop_exit_exits_then() -> None:
    going_on = walk("b:1:stop")
    wait_stopped(going_on)
    going_on.send_signal(signal.SIGCONT)
    assert going_on.communicate(timeout=60) == ("a\nb\na\nb\n", None)
    assert going_on.returncode == 0
    exiting = walk("b:1:stop-exit")
    wait_stopped(exiting)
    exiting.send_signal(signal.SIGCONT)
    assert exiting.communicate(timeout=60) == ("a\n", None)
    assert exiting.returncode == 137


def test_pausing_at_every_step_stops_four_times() -> None:
    proc = walk(PAUSE_AT_EVERY_STEP)
    for _ in range(4):
        wait_stopped(proc)
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    assert proc.communicate(timeout=60)[0] == "a\nb\na\nb\n" and proc.returncode == 0


def test_a_step_the_caller_does_not_know_is_a_bug() -> None:
    from garmexport.process.crash_hooks import hook
    with pytest.raises(ValueError, match="not a crash step"):
        hook("c", STEPS)
