"""The writer actor builds its writer on the site it is given and runs only live work.

Run in thespian's in-process system, as the exporter runs it, with the test as the reader:
it drains the executor's done queue and hands each job's end back to the writer actor. A
message of a past epoch never reaches the writer, and a drop voids what waits.
"""

from __future__ import annotations

import time

import numpy as np
from thespian.actors import ActorSystem

from garmexport.actors.writer_actor import WriterActor
from garmexport.pipeline.messages import Batch, DropOpen, ResetWriter, WriterMessage
from garmexport.pipeline.writer_order import Job
from garmexport.pipeline.writer_start import StartWriter, WriterSite
from garmexport.pipeline.writer_work import Handler, JobDone, Key, SharedBackoff, WriterWork
from garmexport.protocol.naming import FRAME_ORIGIN
from garmexport.protocol.resume import OriginState
from garmexport.settings.load import load_config
from garmexport.storage.local import LocalStorage


class _SeenWork(WriterWork):
    """An executor that notes every message its jobs run, and how many jobs it started."""

    def __init__(self, threads: int) -> None:
        super().__init__(threads)
        self.ran: list[WriterMessage] = []
        self.jobs = 0

    def run(self, key: Key, handle: Handler, job: Job) -> None:
        def noted(msg: WriterMessage):  # noqa: ANN202
            self.ran.append(msg)
            return handle(msg)

        self.jobs += 1
        super().run(key, noted, job)


def bad_batch(epoch: int, offset: int) -> Batch:
    """One record the router already found bad: it goes to quarantine, no decoding."""
    one = np.array([offset], np.int64)
    return Batch(epoch, offset, one, (b"x",), one, np.zeros(1, np.int64),
                 ((0, "short", "record shorter than a frame head", None),), 1)


def act_as_reader(asys: ActorSystem, writer: object, work: WriterWork, reports: int) -> list:
    """Drain the done queue as the reader does until ``reports`` reports came and no job
    runs: each JobDone goes back to the writer actor, the reports are returned."""
    got: list = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (len(got) < reports or work.busy):
        for outcome in work.wait(0.05):
            if isinstance(outcome, JobDone):
                asys.tell(writer, outcome)
            else:
                got.append(outcome)
    return got


def _start(tmp_path, work: WriterWork):  # noqa: ANN001, ANN202
    cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out")})
    site = WriterSite(LocalStorage(str(tmp_path / "out"), "t"), SharedBackoff(0.1, 1.0), work)
    asys = ActorSystem("simpleSystemBase", logDefs=False, transientUnique=True)
    writer = asys.createActor(WriterActor)
    asys.tell(writer, StartWriter(cfg, "t", FRAME_ORIGIN, 0, None, site))
    return asys, writer


def test_only_work_of_the_current_epoch_reaches_the_writer(tmp_path) -> None:  # noqa: ANN001
    work = _SeenWork(1)
    asys, writer = _start(tmp_path, work)
    try:
        asys.tell(writer, ResetWriter(1, OriginState(-1, {})))
        asys.tell(writer, DropOpen(1))
        asys.tell(writer, bad_batch(1, 0))  # sent before the reader saw the drop: void
        asys.tell(writer, ResetWriter(2, OriginState(-1, {})))
        asys.tell(writer, bad_batch(2, 0))
        got = act_as_reader(asys, writer, work, 1)
        ran = [(type(m).__name__, m.epoch) for m in work.ran]
        # the first reset may or may not have run before the drop voided it (a race with
        # the executor thread, harmless: the drop then finds nothing of epoch 1)
        assert ran[-3:] == [("DropOpen", 1), ("ResetWriter", 2), ("Batch", 2)], ran
        assert ("Batch", 1) not in ran
        assert [(r.epoch, r.handled) for r in got] == [(2, 1)]
        assert work.queued_bytes == 0 and not work.busy
    finally:
        asys.shutdown()
        work.close()


def test_messages_sent_while_a_job_runs_run_in_order_in_at_most_one_more_job(tmp_path) -> None:  # noqa: ANN001
    work = _SeenWork(2)
    asys, writer = _start(tmp_path, work)
    try:
        asys.tell(writer, ResetWriter(1, OriginState(-1, {})))
        # the reset's job is running or ended: each batch goes to it, or waits for the next
        for offset in range(5):
            asys.tell(writer, bad_batch(1, offset))
        assert work.jobs == 1
        got = act_as_reader(asys, writer, work, 5)
        assert work.jobs in (1, 2)  # the five batches ran in at most one more job
        assert [int(m.offsets[0]) for m in work.ran if isinstance(m, Batch)] == [0, 1, 2, 3, 4]
        assert [r.handled for r in got] == [1] * 5
        assert work.queued_bytes == 0 and not work.busy
    finally:
        asys.shutdown()
        work.close()
