"""Retry with exponential back-off and jitter: driven by a fake clock, no sleeping."""

from __future__ import annotations

import pytest

from garmexport.errors import PublishConflict, StorageError
from garmexport.storage.retry import retry


class Clock:
    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def flaky(failures: int, exc: BaseException | None = None):
    calls = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise exc or StorageError("down")
        return "ok"

    return fn, calls


def run(fn, clock: Clock, **kw):
    kw = {"attempts": 5, "initial_s": 1.0, "max_s": 8.0, **kw}
    return retry(fn, sleep=clock.sleep, clock=lambda: clock.now, unit=lambda: 1.0, **kw)


def test_returns_the_first_success_after_failures() -> None:
    fn, calls = flaky(3)
    clock = Clock()
    assert run(fn, clock) == "ok"
    assert len(calls) == 4 and clock.sleeps == [1.0, 2.0, 4.0]


def test_reraises_the_last_error_when_attempts_run_out() -> None:
    fn, calls = flaky(10)
    with pytest.raises(StorageError):
        run(fn, Clock(), attempts=3)
    assert len(calls) == 3


def test_a_publish_conflict_is_an_answer_and_never_retried() -> None:
    fn, calls = flaky(1, PublishConflict("a/b"))
    with pytest.raises(PublishConflict):
        run(fn, Clock())
    assert len(calls) == 1


def test_errors_outside_retry_on_propagate_at_once() -> None:
    fn, calls = flaky(1, ValueError("bug"))
    with pytest.raises(ValueError):
        run(fn, Clock())
    assert len(calls) == 1


def test_no_retry_starts_past_the_deadline() -> None:
    fn, calls = flaky(10)
    clock = Clock()
    with pytest.raises(StorageError):
        run(fn, clock, deadline_s=5.0)
    assert clock.sleeps == [1.0, 2.0] and len(calls) == 3  # a 4 s wait would end at 7 s


def test_on_retry_hears_each_retry_before_its_sleep() -> None:
    fn, _ = flaky(2)
    heard = []
    run(fn, Clock(), on_retry=lambda n, exc, d: heard.append((n, str(exc), d)))
    assert heard == [(1, "down", 1.0), (2, "down", 2.0)]


def test_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError):
        run(lambda: "x", Clock(), attempts=0)
