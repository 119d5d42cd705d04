"""The writer actor's gate: what of the reader's messages becomes work in its lane."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from garmexport.protocol.resume import OriginState
from garmexport.pipeline.messages import Batch, DropOpen, FlushOpen, ResetWriter, Tick
from garmexport.pipeline.writer_gate import Admit, WriterGate


def batch(epoch: int) -> Batch:
    return Batch(epoch, 1, (1,), (b"x",), (0,), (0,), (), 1)


def test_nothing_but_a_reset_is_work_before_the_first_reset() -> None:
    gate = WriterGate()
    assert gate.admit(batch(1)) is Admit.SKIP
    assert gate.admit(Tick(1)) is Admit.SKIP
    assert gate.admit(ResetWriter(1, OriginState(-1, {}))) is Admit.QUEUE
    assert gate.admit(batch(1)) is Admit.QUEUE


def test_messages_of_a_past_epoch_are_void() -> None:
    gate = WriterGate()
    gate.admit(ResetWriter(1, OriginState(-1, {})))
    gate.admit(ResetWriter(2, OriginState(10, {})))
    assert [gate.admit(m) for m in (batch(1), Tick(1), FlushOpen(1), DropOpen(1))] == [
        Admit.SKIP] * 4
    assert gate.epoch == 2
    assert [gate.admit(m) for m in (batch(2), Tick(2), FlushOpen(2, 1))] == [Admit.QUEUE] * 3


def test_a_drop_cancels_the_waiting_work_and_ends_the_epoch() -> None:
    gate = WriterGate()
    gate.admit(ResetWriter(3, OriginState(-1, {})))
    assert gate.admit(DropOpen(3)) is Admit.CANCEL_WAITING
    assert gate.epoch == -1
    assert gate.admit(batch(3)) is Admit.SKIP  # sent before the drop reached the writer
    assert gate.admit(DropOpen(3)) is Admit.SKIP  # nothing of the epoch is left to drop
    assert gate.admit(ResetWriter(4, OriginState(7, {}))) is Admit.QUEUE


def _ignored_by_writer(epoch: int, msg: object) -> tuple[bool, int]:
    """OriginWriter.handle's epoch rule, as a reference: (ignored, epoch after)."""
    if isinstance(msg, ResetWriter):
        return False, msg.epoch
    if msg.epoch != epoch:  # type: ignore[attr-defined]
        return True, epoch
    return False, -1 if isinstance(msg, DropOpen) else epoch


MESSAGES = st.tuples(st.sampled_from(["reset", "batch", "tick", "flush", "drop"]),
                     st.integers(1, 4))


@given(st.lists(MESSAGES, max_size=40))
def test_the_gate_skips_exactly_what_the_writer_would_ignore(seq: list) -> None:
    make = {"reset": lambda e: ResetWriter(e, OriginState(-1, {})), "batch": batch, "tick": Tick,
            "flush": FlushOpen, "drop": DropOpen}
    gate, epoch = WriterGate(), -1
    for kind, e in seq:
        msg = make[kind](e)
        ignored, epoch = _ignored_by_writer(epoch, msg)
        admit = gate.admit(msg)
        assert (admit is Admit.SKIP) == ignored
        assert (admit is Admit.CANCEL_WAITING) == (kind == "drop" and not ignored)
        assert gate.epoch == epoch
