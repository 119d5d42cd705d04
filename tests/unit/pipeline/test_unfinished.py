"""A forced stop's last line counts the files open in the writers at that moment.

The writers run on the pool's threads and their reports wait in the pool until the
reader's thread takes them; a forced stop may come while the reader's thread is held up
(a store that does not answer) or between two of its ticks. The count must be the
writers' own as their last reports left it, taken when the line is written.
"""

from __future__ import annotations

import time
from dataclasses import replace

from garmexport.pipeline.unfinished import Unfinished
from garmexport.pipeline.work_lanes import WorkPool
from tests.unit.pipeline.test_work_lanes import batch, report


def wait_for(what, expected, timeout_s: float = 5.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout_s
    while (got := what()) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def test_the_forced_stop_counts_the_open_files_when_it_is_forced_without_a_tick() -> None:
    pool = WorkPool(2)
    unfinished = Unfinished()
    assert unfinished.fields() == {"open_files": 0, "partitions": [],
                                   "abandoned": "no file open in the writers"}
    unfinished.count_with(pool.open_files)

    def writer(partition: int):  # noqa: ANN202
        # a batch's upto stands for the files its writer has open once it is handled
        return lambda msg: replace(report("fs", partition), open_files=msg.upto)

    lanes = [pool.lane("fs/0", writer(0)), pool.lane("fs/1", writer(1)),
             pool.lane("fs/2", writer(2))]
    for lane, files in zip(lanes, (3, 2, 0)):
        lane.submit(batch(1, files))
    assert wait_for(pool.open_files, (5, (0, 1))) == (5, (0, 1))
    assert pool.done.qsize() == 3  # no reader has taken a report: nothing ticked
    fields = unfinished.fields()
    assert (fields["open_files"], fields["partitions"]) == (5, [0, 1]), fields
    assert fields["abandoned"].startswith("5 open files not published (records of "
                                          "partitions [0, 1]"), fields

    lanes[0].submit(batch(1, 0))  # partition 0's files were published since
    assert wait_for(pool.open_files, (2, (1,))) == (2, (1,))
    fields = unfinished.fields()
    assert (fields["open_files"], fields["partitions"]) == (2, [1]), fields
    pool.close()
