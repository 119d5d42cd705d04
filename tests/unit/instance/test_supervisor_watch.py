"""The supervisor's loop over its readers: which signal goes where, and the exit code.
Readers are stand-ins here (tests/integration/test_parallelism.py runs real ones)."""

from __future__ import annotations

import signal
from garmexport.instance.supervisor import ReaderProcess, _watch


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
    assert _watch(readers(a, b), [signal.SIGTERM], stop_within_s=60) == 0
    assert a.got == b.got == [signal.SIGTERM]


def test_a_second_signal_is_forwarded_and_exits_at_once_with_its_code() -> None:
    a, b = FakeProcess(ends_on=3), FakeProcess(ends_on=3)
    assert _watch(readers(a, b), [signal.SIGINT, signal.SIGINT], stop_within_s=60) == 130
    assert a.got == b.got == [signal.SIGINT, signal.SIGINT]


def test_a_reader_that_ends_on_its_own_stops_the_others_and_gives_its_code() -> None:
    dead, other = FakeProcess(code=-9, polls_left=1), FakeProcess()
    assert _watch(readers(other, dead), [], stop_within_s=60) == 137
    assert other.got == [signal.SIGTERM] and dead.got == []


def test_the_operators_signal_after_a_failure_is_not_a_second_one_for_the_readers() -> None:
    signals: list[int] = []

    class Dying(FakeProcess):
        def poll(self) -> int | None:
            code = super().poll()
            if code is not None and not signals:
                signals.append(signal.SIGTERM)  # Marathon's kill, as the instance stops
            return code

    other = FakeProcess(ends_on=2)  # a second SIGTERM would end it
    assert _watch(readers(Dying(code=1, polls_left=1), other), signals, stop_within_s=0.5) == 1
    assert other.got == [signal.SIGTERM, signal.SIGKILL]  # asked once, killed at the deadline


def test_readers_still_running_past_the_deadline_are_killed() -> None:
    stuck = FakeProcess(ends_on=99)
    assert _watch(readers(stuck), [signal.SIGTERM], stop_within_s=0) == 137
    assert stuck.got == [signal.SIGTERM, signal.SIGKILL]
