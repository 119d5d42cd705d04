"""The work pool: each lane in order and alone, lanes side by side, drops and failures."""

from __future__ import annotations

import threading
import time

import pytest

from garmexport.pipeline.work_lanes import SharedBackoff, WorkPool, until_failure
from garmexport.pipeline.messages import Batch, DropOpen, Failure, Tick, WriterReport


def batch(epoch: int, offset: int, size: int = 10) -> Batch:
    return Batch(epoch, offset, (offset,), (b"x" * size,), (0,), (0,), (), size)


def report(name: str, n: int) -> WriterReport:
    return WriterReport(name, n, 0, 1, n, None, (), 0, 0, None, False, None, 0, (), 0)


def outcomes(pool: WorkPool, count: int, timeout_s: float = 5.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += pool.wait(0.05)
    return got


def test_a_lane_runs_its_messages_one_at_a_time_in_order() -> None:
    pool = WorkPool(3)
    running, overlap = [0], [False]
    lock = threading.Lock()

    def handle(msg):  # noqa: ANN001, ANN202
        with lock:
            running[0] += 1
            overlap[0] |= running[0] > 1
        time.sleep(0.002)
        with lock:
            running[0] -= 1
        return report("a", msg.upto)

    lane = pool.lane("a", handle)
    for i in range(50):
        lane.submit(batch(1, i))
    got = outcomes(pool, 50)
    assert [r.partition for r in got] == list(range(50))
    assert not overlap[0]
    assert pool.queued_bytes == 0 and not pool.busy
    pool.close()


def test_lanes_run_side_by_side() -> None:
    pool = WorkPool(2)
    both = threading.Barrier(2, timeout=5)

    def handle(msg):  # noqa: ANN001, ANN202
        both.wait()  # only returns when the other lane's message runs at the same time
        return report("x", msg.upto)

    pool.lane("a", handle).submit(batch(1, 1))
    pool.lane("b", handle).submit(batch(1, 2))
    assert sorted(r.partition for r in outcomes(pool, 2)) == [1, 2]
    pool.close()


def test_queued_bytes_count_batches_until_handled() -> None:
    pool = WorkPool(1)
    release = threading.Event()
    lane = pool.lane("a", lambda msg: (release.wait(5), report("a", msg.upto))[1])
    lane.submit(batch(1, 1, size=100))
    lane.submit(batch(1, 2, size=30))
    lane.submit(Tick(1))
    assert pool.queued_bytes == 130 and pool.busy
    release.set()
    assert len(outcomes(pool, 3)) == 3
    assert pool.queued_bytes == 0 and not pool.busy
    pool.close()


def test_cancel_waiting_drops_what_has_not_started() -> None:
    pool = WorkPool(1)
    started, release = threading.Event(), threading.Event()
    seen: list = []

    def handle(msg):  # noqa: ANN001, ANN202
        seen.append(msg)
        if len(seen) == 1:
            started.set()
            release.wait(5)
        return None if isinstance(msg, DropOpen) else report("a", getattr(msg, "upto", -1))

    lane = pool.lane("a", handle)
    lane.submit(batch(1, 1))
    assert started.wait(5)
    lane.submit(batch(1, 2, size=50))
    lane.submit(Tick(1))
    lane.cancel_waiting()  # what the writer actor does on a DropOpen (writer_gate)
    lane.submit(DropOpen(1))
    assert pool.queued_bytes == 10  # the waiting batch is gone; the running one counts
    release.set()
    got = outcomes(pool, 1)
    time.sleep(0.05)
    assert [type(m).__name__ for m in seen] == ["Batch", "DropOpen"]
    assert [r.partition for r in got] == [1]
    assert not pool.busy and pool.queued_bytes == 0
    pool.close()


def test_a_failure_is_reported_and_its_lane_takes_nothing_more() -> None:
    pool = WorkPool(2)
    calls: list = []

    def handle(msg):  # noqa: ANN001, ANN202
        calls.append(msg)
        raise RuntimeError("disk on fire")

    lane = pool.lane("gc/3", handle)
    lane.submit(batch(1, 1))
    lane.submit(batch(1, 2))
    [failure] = outcomes(pool, 1)
    assert isinstance(failure, Failure) and failure.where == "writer gc/3"
    assert "disk on fire" in failure.traceback
    lane.submit(batch(1, 3))
    time.sleep(0.05)
    assert len(calls) == 1 and pool.take() == [] and not pool.busy
    pool.close()


def test_a_closed_pool_runs_nothing() -> None:
    pool = WorkPool(1)
    pool.close()
    ran: list = []
    pool.lane("a", ran.append).submit(batch(1, 1))
    time.sleep(0.05)
    assert ran == [] and not pool.busy


def test_a_pool_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        WorkPool(0)


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
    pool = WorkPool(2)
    release = threading.Event()
    lane = pool.lane("container/3", lambda msg: (release.wait(5), None)[1])
    assert pool.running_since() is None
    before = time.monotonic()
    lane.submit(Tick(1))
    deadline = time.monotonic() + 5
    while pool.running_since() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    since, what = pool.running_since()  # type: ignore[misc]
    assert before <= since <= time.monotonic()
    assert "container/3" in what and "Tick" in what
    release.set()
    deadline = time.monotonic() + 5
    while pool.busy and time.monotonic() < deadline:
        time.sleep(0.005)
    assert pool.running_since() is None
    pool.close()


def test_reports_after_a_failure_are_not_applied() -> None:
    a, b, c = report("a", 1), report("b", 2), report("c", 3)
    failure = Failure("writer b/2", "Traceback ...", "RuntimeError: x")
    assert until_failure([a, b]) == ([a, b], None)
    assert until_failure([a, failure, c]) == ([a], failure)
    assert until_failure([failure]) == ([], failure)
    assert until_failure([]) == ([], None)
