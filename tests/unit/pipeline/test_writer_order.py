"""The writer actor's order: what of the reader's messages runs, when, and in which order."""

from __future__ import annotations

from collections import deque

from hypothesis import given
from hypothesis import strategies as st

from garmexport.protocol.resume import OriginState
from garmexport.pipeline.messages import Batch, DropOpen, FlushOpen, ResetWriter, Tick
from garmexport.pipeline.writer_order import WriterOrder


def batch(epoch: int, offset: int = 1) -> Batch:
    return Batch(epoch, offset, (offset,), (b"x",), (0,), (0,), (), 1)


def reset(epoch: int) -> ResetWriter:
    return ResetWriter(epoch, OriginState(-1, {}))


def test_nothing_but_a_reset_is_work_before_the_first_reset() -> None:
    order = WriterOrder()
    b, t = batch(1), Tick(1)
    assert order.take(b) == [b] and order.take(t) == [t]
    assert order.next_job() is None
    r = reset(1)
    assert order.take(r) == [] and order.take(b) == []
    assert order.next_job().messages == (r, b)  # type: ignore[union-attr]


def test_messages_of_a_past_epoch_are_void() -> None:
    order = WriterOrder()
    order.take(reset(1))
    order.take(reset(2))
    past = [batch(1), Tick(1), FlushOpen(1), DropOpen(1)]
    assert [order.take(m) for m in past] == [[m] for m in past]
    assert order.epoch == 2
    live = [batch(2), Tick(2), FlushOpen(2, 1)]
    assert [order.take(m) for m in live] == [[], [], []]
    assert order.next_job().messages[-3:] == tuple(live)  # type: ignore[union-attr]


def test_one_job_runs_at_a_time_and_takes_what_comes_while_it_runs() -> None:
    order = WriterOrder()
    r = reset(1)
    order.take(r)
    first = order.next_job()
    assert first is not None and order.next_job() is None
    b1, t = batch(1, 1), Tick(1)
    order.take(b1)
    assert first.next() is r and first.next() is b1  # given to the running job
    assert first.next() is None  # nothing left: the job has ended
    order.take(t)  # before the job's end reached the actor: waits for the next job
    assert order.next_job() is None and order.waiting == deque([t])
    b2 = batch(1, 2)
    order.take(b2)  # behind what waits, never before it
    assert order.job_done() == []
    job = order.next_job()
    assert job is not None and job.messages == (t, b2)
    assert job.next() is t and job.next() is b2 and job.next() is None
    order.job_done()
    assert order.next_job() is None


def test_a_drop_voids_what_waits_and_what_the_running_job_has_not_started() -> None:
    order = WriterOrder()
    r3 = reset(3)
    order.take(r3)
    running = order.next_job()
    assert running is not None and running.next() is r3  # the reset runs
    given_to_job = [batch(3, 5), Tick(3)]
    for m in given_to_job:
        order.take(m)
    drop = DropOpen(3)
    assert order.take(drop) == given_to_job
    assert order.epoch == -1 and running.messages == (drop,)  # the drop runs next
    b = batch(3, 6)
    assert order.take(b) == [b]  # sent before the drop reached the writer
    assert order.take(drop) == [drop]  # nothing of the epoch is left to drop
    r4 = reset(4)
    assert order.take(r4) == []
    assert running.next() is drop and running.next() is r4 and running.next() is None
    assert order.job_done() == [] and order.next_job() is None


def test_a_drop_voids_what_waits_for_the_next_job() -> None:
    order = WriterOrder()
    order.take(reset(2))
    job = order.next_job()
    job.next(), job.next()  # type: ignore[union-attr]
    waiting = [batch(2, 1), Tick(2)]
    for m in waiting:
        order.take(m)
    drop = DropOpen(2)
    assert order.take(drop) == waiting and order.waiting == deque([drop])


def test_after_a_failed_job_nothing_more_runs() -> None:
    order = WriterOrder()
    r = reset(1)
    order.take(r)
    job = order.next_job()
    assert job is not None
    job.failed = True  # its thread: a message raised
    b = batch(1)
    order.take(b)  # the failed job takes nothing more: it waits
    assert job.next() is None and job.finish() == [r]  # what had not run is void
    assert order.job_done() == [b]
    t = Tick(1)
    assert order.take(t) == [t] and order.next_job() is None


def _ignored_by_writer(epoch: int, msg: object) -> tuple[bool, int]:
    """OriginWriter.handle's epoch rule, as a reference: (ignored, epoch after)."""
    if isinstance(msg, ResetWriter):
        return False, msg.epoch
    if msg.epoch != epoch:  # type: ignore[attr-defined]
        return True, epoch
    return False, -1 if isinstance(msg, DropOpen) else epoch


MESSAGES = st.tuples(st.sampled_from(["reset", "batch", "tick", "flush", "drop", "step",
                                      "done"]), st.integers(1, 4))


@given(st.lists(MESSAGES, max_size=40))
def test_the_order_runs_exactly_what_the_writer_would_not_ignore_in_order(seq: list) -> None:
    """Whatever the jobs' timing ("step": the job's thread runs its next message or finds
    none and ends; "done": its end reaches the actor), what runs is the reader's live
    messages in their order; each message runs or is void exactly once, and only a drop
    voids a live one, which it follows."""
    make = {"reset": reset, "batch": batch, "tick": Tick, "flush": FlushOpen,
            "drop": DropOpen}
    order, epoch = WriterOrder(), -1
    live: list = []  # the messages the writer would not ignore, in order
    ignored_msgs: list = []
    ran: list = []
    voided: list = []
    ended = False  # the running job found nothing left; its JobDone is on the way

    def step() -> None:
        nonlocal ended
        job = order.running
        if job is not None and not ended:
            msg = job.next()
            if msg is None:
                ended = True
            else:
                ran.append(msg)

    def done() -> None:
        nonlocal ended
        if ended:
            voided.extend(order.job_done())
            ended = False

    for kind, e in seq:
        if kind == "step":
            step()
        elif kind == "done":
            done()
        else:
            msg = make[kind](e)
            ignored, epoch = _ignored_by_writer(epoch, msg)
            (ignored_msgs if ignored else live).append(msg)
            out = order.take(msg)
            assert any(m is msg for m in out) == ignored
            voided.extend(out)
            assert order.epoch == epoch
        order.next_job()
    while order.running is not None:
        step()
        done()
        order.next_job()
    ids = [id(m) for m in ran]
    assert ids == [id(m) for m in live if id(m) in set(ids)]  # in the reader's order
    fates = sorted([*ids, *map(id, voided)])
    assert fates == sorted(map(id, [*live, *ignored_msgs]))  # each exactly once
    assert not order.waiting
    # a live drop always runs (the writer forgets its open files); a live message that
    # does not run was voided by a drop that came after it
    assert all(id(m) in set(ids) for m in live if isinstance(m, DropOpen))
    for m in live:
        if id(m) not in set(ids):
            assert any(isinstance(d, DropOpen) and live.index(d) > live.index(m) for d in live)
