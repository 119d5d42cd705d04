"""A call in a forked child: its exception comes back, its imports and writes stay there."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from garmexport.errors import StorageError
from garmexport.process.in_child import ChildFailed, call_in_child


def _write_pid(path: Path) -> None:
    path.write_text(str(os.getpid()))


def _raise_storage() -> None:
    raise StorageError("store down")


def _import_module(name: str) -> None:
    __import__(name)


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class _Unpicklable(Exception):
    def __reduce__(self):  # type: ignore[override]
        raise TypeError("no pickling")


def _raise_unpicklable() -> None:
    raise _Unpicklable("odd")


def test_the_call_runs_in_another_process(tmp_path: Path) -> None:
    out = tmp_path / "pid"
    call_in_child(_write_pid, out)
    assert int(out.read_text()) != os.getpid()


def test_its_exception_is_raised_in_the_caller() -> None:
    with pytest.raises(StorageError, match="store down"):
        call_in_child(_raise_storage)


def test_what_it_imports_is_not_loaded_here() -> None:
    name = "garmexport.testbed.generator_messages"
    sys.modules.pop(name, None)
    call_in_child(_import_module, name)
    assert name not in sys.modules


def test_a_child_killed_without_an_outcome_fails_the_call() -> None:
    with pytest.raises(ChildFailed, match="exit status -9"):
        call_in_child(_kill_self)


def test_an_exception_that_does_not_pickle_comes_back_as_its_text() -> None:
    with pytest.raises(ChildFailed, match="_Unpicklable: odd"):
        call_in_child(_raise_unpicklable)
