"""A partition's reader state changes only through its own methods, as the reader decides."""

from __future__ import annotations

import numpy as np

from garmexport.observe.lag_time import PositionTimes
from garmexport.pipeline.reader_state import Assigned, WriterStatus
from garmexport.pipeline.router import OriginBatch
from garmexport.protocol.ledger import PartitionLedger
from garmexport.protocol.marker_keeper import MarkerKeeper
from garmexport.protocol.resume import PartitionState

ORIGINS = ("fs", "gc")


def assigned() -> Assigned:
    ledger = PartitionLedger.start(PartitionState(0), ORIGINS, 0)
    return Assigned(1, ledger, MarkerKeeper(1.0, 60.0),
                    PositionTimes(0))


def batch(*offsets: int) -> OriginBatch:
    arr = np.array(offsets, np.int64)
    return OriginBatch(arr, [b"v"] * len(offsets), arr, np.zeros(len(offsets), np.int64),
                       [], len(offsets))


def test_held_records_gather_per_origin_and_count_in_flight_once() -> None:
    a = assigned()
    a.hold("fs", batch(0, 1), now=5.0)
    a.hold("fs", batch(2), now=6.0)
    a.ledger.routed_upto(2)
    assert a.pending["fs"][1] == 5.0  # when the first arrived
    assert a.ledger.open_writers()  # W waits for the held batch
    released = a.release("fs")
    assert released.offsets.tolist() == [0, 1, 2] and released.nbytes == 3
    assert "fs" not in a.pending


def test_a_writer_is_started_once_per_epoch() -> None:
    a = assigned()
    assert a.writer_started("gc") is True
    assert a.writer_started("gc") is False
    assert a.reset_sent == {"gc"} and a.writers["gc"] == WriterStatus()


def test_a_report_clears_a_flush_request_and_says_whether_the_store_failed() -> None:
    a = assigned()
    a.writer_started("fs")
    a.writers["fs"].request_flush()
    assert a.writer_reported("fs", 100, 1, 3.0, True, "OSError: gone") is True
    view = a.writers["fs"]
    assert (view.buffered_bytes, view.open_files, view.oldest_open_s) == (100, 1, 3.0)
    assert not view.flush_requested and view.store_error == "OSError: gone"
    # the first report after a failure still counts as failing: the episode ends on it
    assert a.writer_reported("fs", 0, 0, None, False, "") is True
    assert a.writer_reported("fs", 0, 0, None, False, "") is False


def test_a_burst_counts_records_until_it_ends() -> None:
    a = assigned()
    hour = 3_600_000
    a.took_records(3, now=7.0, first=(0, 0), last=(2, hour))
    a.took_records(2, now=8.0, first=(3, 2 * hour), last=(4, 3 * hour))
    assert (a.burst, a.last_record_s) == (5, 8.0)
    assert a.times.time_at(3) == 2 * hour  # the lag in seconds is timed from these
    a.burst_ended()
    assert a.burst == 0
