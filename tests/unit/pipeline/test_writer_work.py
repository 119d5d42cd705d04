"""The writers' executor: a job's messages in order, jobs side by side, counts, failures."""

from __future__ import annotations

import threading
import time

import pytest

from garmexport.pipeline.messages import Batch, DropOpen, Failure, Tick, WriterReport
from garmexport.pipeline.writer_order import Job
from garmexport.pipeline.writer_work import JobDone, SharedBackoff, WriterWork, until_failure


def batch(epoch: int, offset: int, size: int = 10) -> Batch:
    return Batch(epoch, offset, (offset,), (b"x" * size,), (0,), (0,), (), size)


def report(name: str, n: int, open_files: int = 0) -> WriterReport:
    return WriterReport(name, n, 0, 1, n, None, (), 0, open_files, None, False, None, 0, (), 0)


def outcomes(work: WriterWork, count: int, timeout_s: float = 5.0) -> list:
    """The next ``count`` outcomes other than job ends."""
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += [o for o in work.wait(0.05) if not isinstance(o, JobDone)]
    return got


def job_ends(work: WriterWork, count: int, timeout_s: float = 5.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += work.wait(0.05)
    return got


def run(work: WriterWork, key: tuple[str, int], handle, *messages) -> Job:  # noqa: ANN001
    """What a writer actor does: count the messages held, then run them as one job."""
    job = Job(messages)
    work.held(messages)
    work.run(key, handle, job)
    return job


def test_a_job_runs_its_messages_in_order_then_says_it_ended() -> None:
    work = WriterWork(3)
    run(work, ("a", 0), lambda msg: report("a", msg.upto), *[batch(1, i) for i in range(50)])
    got = job_ends(work, 51)
    assert [r.partition for r in got[:50]] == list(range(50))
    assert got[50] == JobDone("a", 0)
    assert work.queued_bytes == 0 and not work.busy
    work.close()


def test_a_running_job_runs_what_it_is_given_before_it_ends() -> None:
    work = WriterWork(1)
    release = threading.Event()

    def handle(msg):  # noqa: ANN001, ANN202
        release.wait(5)
        return report("a", msg.upto)

    job = run(work, ("a", 0), handle, batch(1, 1))
    later = batch(1, 2)
    work.held([later])
    assert job.offer(later)  # what the writer actor's order does while the job runs
    release.set()
    got = job_ends(work, 3)
    assert [type(o).__name__ for o in got] == ["WriterReport", "WriterReport", "JobDone"]
    assert [r.partition for r in got[:2]] == [1, 2]
    assert not job.offer(batch(1, 3))  # ended: the next message waits for the next job
    assert work.queued_bytes == 0 and not work.busy
    work.close()


def test_jobs_of_two_writers_run_side_by_side() -> None:
    work = WriterWork(2)
    both = threading.Barrier(2, timeout=5)

    def handle(msg):  # noqa: ANN001, ANN202
        both.wait()  # only returns when the other writer's message runs at the same time
        return report("x", msg.upto)

    run(work, ("a", 0), handle, batch(1, 1))
    run(work, ("b", 0), handle, batch(1, 2))
    assert sorted(r.partition for r in outcomes(work, 2)) == [1, 2]
    work.close()


def test_queued_bytes_count_batches_from_held_until_handled() -> None:
    work = WriterWork(1)
    release = threading.Event()
    run(work, ("a", 0), lambda msg: (release.wait(5), report("a", getattr(msg, "upto", -1)))[1],
        batch(1, 1, size=100), batch(1, 2, size=30), Tick(1))
    assert work.queued_bytes == 130 and work.busy
    waiting = batch(1, 3, size=7)
    work.held([waiting])  # queued in its writer actor behind the running job
    assert work.queued_bytes == 137
    work.held([waiting], -1)  # voided by a drop
    release.set()
    got = job_ends(work, 4)
    assert [type(o).__name__ for o in got] == ["WriterReport"] * 3 + ["JobDone"]
    assert work.queued_bytes == 0 and not work.busy
    work.close()


def test_what_a_drop_takes_back_from_a_job_never_runs() -> None:
    work = WriterWork(1)
    started, release = threading.Event(), threading.Event()
    seen: list = []

    def handle(msg):  # noqa: ANN001, ANN202
        seen.append(msg)
        if len(seen) == 1:
            started.set()
            release.wait(5)
        return None if isinstance(msg, DropOpen) else report("a", getattr(msg, "upto", -1))

    job = run(work, ("a", 0), handle, batch(1, 1), batch(1, 2, size=50), Tick(1))
    assert started.wait(5)
    work.held(job.void_rest(), -1)  # what the writer actor's order does on a DropOpen
    release.set()
    got = job_ends(work, 2)
    assert [type(m).__name__ for m in seen] == ["Batch"]
    assert [type(o).__name__ for o in got] == ["WriterReport", "JobDone"]
    assert not work.busy and work.queued_bytes == 0
    work.close()


def test_a_failure_is_reported_before_the_job_ends_and_stops_the_job() -> None:
    work = WriterWork(2)
    calls: list = []

    def handle(msg):  # noqa: ANN001, ANN202
        calls.append(msg)
        raise RuntimeError("disk on fire")

    job = run(work, ("gc", 3), handle, batch(1, 1), batch(1, 2))
    failure, done = job_ends(work, 2)
    assert isinstance(failure, Failure) and failure.where == "writer gc/3"
    assert "disk on fire" in failure.traceback
    assert done == JobDone("gc", 3) and job.failed
    assert len(calls) == 1 and not work.busy and work.queued_bytes == 0
    work.close()


def test_a_closed_executor_runs_nothing() -> None:
    work = WriterWork(1)
    work.close()
    ran: list = []
    run(work, ("a", 0), ran.append, batch(1, 1))
    time.sleep(0.05)
    assert ran == [] and work.take() == []


def test_an_executor_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        WriterWork(0)


def test_open_files_are_each_writers_last_report() -> None:
    work = WriterWork(2)
    run(work, ("fs", 0), lambda m: report("fs", 0, open_files=3), Tick(1))
    run(work, ("gc", 1), lambda m: report("gc", 1, open_files=2), Tick(1))
    job_ends(work, 4)
    assert work.open_files() == (5, (0, 1))
    run(work, ("fs", 0), lambda m: report("fs", 0, open_files=0), Tick(1))
    job_ends(work, 2)
    assert work.open_files() == (2, (1,))
    work.close()


def test_the_shared_backoff_counts_every_failure_of_many_threads() -> None:
    backoff = SharedBackoff(0.5, 30.0)
    threads = [threading.Thread(target=lambda: [backoff.failed(0.0) for _ in range(2000)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert backoff.failures == 8000 and backoff.waiting(1.0)
    backoff.succeeded()
    assert not backoff.waiting(1.0)


def test_running_since_names_the_longest_running_message_until_it_ends() -> None:
    work = WriterWork(2)
    release = threading.Event()
    assert work.running_since() is None
    before = time.monotonic()
    run(work, ("container", 3), lambda msg: (release.wait(5), None)[1], Tick(1))
    deadline = time.monotonic() + 5
    while work.running_since() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    since, what = work.running_since()  # type: ignore[misc]
    assert before <= since <= time.monotonic()
    assert "container/3" in what and "Tick" in what
    release.set()
    job_ends(work, 1)
    assert work.running_since() is None and not work.busy
    work.close()


def test_outcomes_after_a_failure_are_not_applied() -> None:
    a, b, c = report("a", 1), report("b", 2), JobDone("c", 3)
    failure = Failure("writer b/2", "Traceback ...", "RuntimeError: x")
    assert until_failure([a, b]) == ([a, b], None)
    assert until_failure([a, failure, c]) == ([a], failure)
    assert until_failure([failure]) == ([], failure)
    assert until_failure([]) == ([], None)
