"""The supervisor's loop over its readers: which signal goes where, and the exit code.
Readers are stand-ins here (tests/integration/test_parallelism.py runs real ones)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from garmexport.instance import supervisor
from garmexport.instance.supervisor import ReaderProcess, _watch
from garmexport.process.stop_signal import INSTANCE_STOPPING, SIBLING_ENDED


class FakeProcess:
    """A reader process that ends when ``ends_on`` of the signals it got arrives, with
    ``code``; or ends by itself after ``polls_left`` polls."""

    def __init__(self, ends_on: int = 1, code: int = 0, polls_left: int | None = None) -> None:
        self.got: list[int] = []
        self.returncode: int | None = None
        self._ends_on, self._code, self._polls_left = ends_on, code, polls_left

    def send_signal(self, signum: int) -> None:
        self.got.append(signum)
        if signum == signal.SIGKILL:
            self.returncode = -9
        elif len(self.got) >= self._ends_on and self.returncode is None:
            self.returncode = self._code

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self) -> int | None:
        return self.returncode

    def poll(self) -> int | None:
        if self._polls_left is not None and self.returncode is None:
            self._polls_left -= 1
            if self._polls_left <= 0:
                self.returncode = self._code
        return self.returncode


def readers(*processes: FakeProcess) -> list[ReaderProcess]:
    return [ReaderProcess(f"r{k}", p) for k, p in enumerate(processes)]  # type: ignore[arg-type]


def test_a_first_signal_reaches_every_reader_once_and_a_clean_stop_exits_0() -> None:
    a, b = FakeProcess(), FakeProcess()
    assert _watch(readers(a, b), [signal.SIGTERM], stop_within_s=60, reports={}) == 0
    assert a.got == b.got == [INSTANCE_STOPPING]  # never a reader's second (a group kill)


def test_a_second_signal_is_forwarded_and_exits_at_once_with_its_code(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    a, b = FakeProcess(ends_on=2, code=-2), FakeProcess(ends_on=2, code=-2)
    reports = {"r0": str(tmp_path / "r0.json"), "r1": str(tmp_path / "r1.json")}
    Path(reports["r0"]).write_text(json.dumps({"open_files": 3, "partitions": [0, 2]}))
    caplog.set_level("INFO")
    assert _watch(readers(a, b), [signal.SIGINT, signal.SIGINT], stop_within_s=60,
                  reports=reports) == 130
    assert a.got == b.got == [INSTANCE_STOPPING, signal.SIGINT]
    [last] = [r for r in caplog.records if r.getMessage() == "instance_stopped"]
    said = last.garmexport_fields  # type: ignore[attr-defined]  # log_event's fields
    assert said["reason"] == "second SIGINT: stop forced" and said["open_files"] == 3, said
    assert said["readers"] == {"r0": 130, "r1": 130}, said
    assert said["abandoned"] == {
        "r0": "3 open files not published (partitions [0, 2])",
        "r1": "exited 130 without a report: it had not started exporting"}, said


def test_a_second_signal_is_sent_again_to_a_reader_that_took_two_for_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "RESEND_EVERY_S", 0.01)
    merged, stuck = FakeProcess(ends_on=3, code=-15), FakeProcess(ends_on=99)
    monkeypatch.setattr(supervisor, "FORCED_EXIT_WAIT_S", 0.2)
    assert _watch(readers(merged, stuck), [signal.SIGTERM, signal.SIGTERM], stop_within_s=60,
                  reports={}) == 143
    assert merged.got == [INSTANCE_STOPPING, signal.SIGTERM, signal.SIGTERM]  # merged two
    assert stuck.got[-1] == signal.SIGKILL and stuck.returncode == -9  # killed at the wait


def test_a_reader_that_ends_on_its_own_stops_the_others_and_gives_its_code() -> None:
    dead, other = FakeProcess(code=-9, polls_left=1), FakeProcess()
    assert _watch(readers(other, dead), [], stop_within_s=60, reports={}) == 137
    assert other.got == [SIBLING_ENDED] and dead.got == []


def test_the_operators_signal_after_a_failure_is_not_a_second_one_for_the_readers() -> None:
    signals: list[int] = []

    class Dying(FakeProcess):
        def poll(self) -> int | None:
            code = super().poll()
            if code is not None and not signals:
                signals.append(signal.SIGTERM)  # Marathon's kill, as the instance stops
            return code

    other = FakeProcess(ends_on=2)  # a second SIGTERM would end it
    assert _watch(readers(Dying(code=1, polls_left=1), other), signals, stop_within_s=0.5,
                  reports={}) == 1
    assert other.got == [SIBLING_ENDED, signal.SIGKILL]  # asked once, killed at the deadline


def test_readers_still_running_past_the_deadline_are_killed() -> None:
    stuck = FakeProcess(ends_on=99)
    assert _watch(readers(stuck), [signal.SIGTERM], stop_within_s=0, reports={}) == 137
    assert stuck.got == [INSTANCE_STOPPING, signal.SIGKILL]
