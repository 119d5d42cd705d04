"""The commit steps are named once; a crash point names one of them or is a bug."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from garmexport.protocol.commit_steps import STEPS
from garmexport.pipeline.crash_points import CRASH_ENV, crash_point


def test_a_crash_point_must_name_a_commit_step() -> None:
    with pytest.raises(ValueError, match="not a crash step"):
        crash_point("publsh")


def test_the_nth_step_named_in_the_environment_exits_like_a_kill() -> None:
    code = ("from garmexport.pipeline.crash_points import crash_point\n"
            "crash_point('publish'); print('first', flush=True)\n"
            "crash_point('marker'); crash_point('publish'); print('second', flush=True)\n")
    env = {**os.environ, CRASH_ENV: "publish:2"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (137, "first\n")


def test_steps_are_unique_and_in_commit_order() -> None:
    assert len(set(STEPS)) == len(STEPS)
    assert STEPS.index("intent") < STEPS.index("publish") < STEPS.index("marker")
