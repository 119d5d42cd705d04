"""A forced stop's last line counts the files open in the writers at that moment.

The writers run on the executor's threads and their reports wait on its done queue until
the reader's thread takes them; a forced stop may come while the reader's thread is held up
(a store that does not answer) or between two of its ticks. The count must be the
writers' own as their last reports left it, taken when the line is written.
"""

from __future__ import annotations

import time
from dataclasses import replace

from garmexport.pipeline.unfinished import Unfinished
from garmexport.pipeline.writer_work import WriterWork
from tests.unit.pipeline.test_writer_work import batch, report, run


def wait_for(what, expected, timeout_s: float = 5.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout_s
    while (got := what()) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def test_the_forced_stop_counts_the_open_files_when_it_is_forced_without_a_tick() -> None:
    work = WriterWork(2)
    unfinished = Unfinished()
    assert unfinished.fields() == {"open_files": 0, "partitions": [],
                                   "abandoned": "no file open in the writers"}
    unfinished.count_with(work.open_files)

    def writer(partition: int):  # noqa: ANN202
        # a batch's upto stands for the files its writer has open once it is handled
        return lambda msg: replace(report("fs", partition), open_files=msg.upto)

    for p, files in zip((0, 1, 2), (3, 2, 0)):
        run(work, ("fs", p), writer(p), batch(1, files))
    assert wait_for(work.open_files, (5, (0, 1))) == (5, (0, 1))
    time.sleep(0.05)
    assert work.done.qsize() == 6  # no reader has taken a report or a job end: nothing ticked
    fields = unfinished.fields()
    assert (fields["open_files"], fields["partitions"]) == (5, [0, 1]), fields
    assert fields["abandoned"].startswith("5 open files not published (records of "
                                          "partitions [0, 1]"), fields

    run(work, ("fs", 0), writer(0), batch(1, 0))  # partition 0's files were published since
    assert wait_for(work.open_files, (2, (1,))) == (2, (1,))
    fields = unfinished.fields()
    assert (fields["open_files"], fields["partitions"]) == (2, [1]), fields
    work.close()
