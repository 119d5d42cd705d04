"""A catch-up ends with its files published; a sparse stream does not become tiny files.

After a burst of at least ``decode_batch_records`` records, a partition that stays quiet
for ``idle_flush_s`` has its open files published at once instead of when their age runs
out. A trickle of records never counts as a burst, so it keeps to the age limit.
"""

from __future__ import annotations

from garmexport.settings.load import load_config
from garmexport.wire.events import EXPORTED
from garmexport.wire.frames import encode
from garmexport.storage.local import LocalStorage
from garmexport.verify.count import read_output
from tests.pipeline.harness import FakeRecord, Owner

NOW_MS = 1_795_300_000_000


def owner(tmp_path):  # noqa: ANN001, ANN201
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
        "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "600",
        "GARMEXPORT_WRITER_IDLE_FLUSH_S": "2",
        "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "100",
    })
    o = Owner(cfg, LocalStorage(str(tmp_path / "out"), "x"))
    o.coordinator.assign([0])
    return o, cfg


def records(start: int, n: int) -> list[FakeRecord]:
    t = EXPORTED[0]
    return [FakeRecord(o, encode(t.marker, NOW_MS, b"", b""), NOW_MS) for o in range(start, start + n)]


def published(o: Owner, cfg) -> int:  # noqa: ANN001
    held, _ = read_output(o.storage, cfg.source.topic)
    return len(held)


def test_after_a_burst_a_quiet_partition_publishes_without_waiting_for_the_age(tmp_path):
    o, cfg = owner(tmp_path)
    o.feed(0, records(0, 500))
    o.tick(1.0)
    assert published(o, cfg) == 0, "still within idle_flush_s of the last record"
    o.tick(1.5)
    assert published(o, cfg) == 500


def test_a_sparse_stream_keeps_to_the_age_limit(tmp_path):
    o, cfg = owner(tmp_path)
    for i in range(5):
        o.feed(0, records(i, 1))
        o.tick(3.0)  # quiet for longer than idle_flush_s after every record
    assert published(o, cfg) == 0, "a trickle must not be published record by record"
    o.tick(600.0)
    assert published(o, cfg) == 5


def test_no_file_holds_more_than_max_file_rows_even_from_one_large_batch(tmp_path):
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
        "GARMEXPORT_WRITER_MAX_FILE_ROWS": "7",
        "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "100",
    })
    o = Owner(cfg, LocalStorage(str(tmp_path / "out"), "x"))
    o.coordinator.assign([0])
    o.feed(0, records(0, 100))
    o.finish()
    import pyarrow.parquet as pq

    sizes = sorted(pq.read_metadata(f).num_rows for f in (tmp_path / "out").glob("*/day=*/*.parquet"))
    assert sizes == [2] + [7] * 14, sizes
    assert published(o, cfg) == 100


def test_the_poll_loop_publishes_a_burst_when_it_ends_without_waiting_for_a_tick(tmp_path):
    o, cfg = owner(tmp_path)
    assert o.coordinator.flush_idle() is None, "no burst yet: the poll may wait its full timeout"
    o.feed(0, records(0, 500))
    o.now += 0.5
    wait = o.coordinator.flush_idle()
    assert wait == 1.5, "the next poll must return by the time the burst can end"
    o.deliver()
    assert published(o, cfg) == 0
    o.now += 1.5
    assert o.coordinator.flush_idle() is None, "the burst ended and was flushed: nothing pending"
    o.deliver()
    assert published(o, cfg) == 500


def test_records_arriving_within_idle_flush_s_keep_the_burst_open(tmp_path):
    o, cfg = owner(tmp_path)
    for i in range(5):
        o.feed(0, records(i * 100, 100))
        o.now += 1.9
        assert o.coordinator.flush_idle() is not None
        o.deliver()
    assert published(o, cfg) == 0, "never quiet for idle_flush_s: still one burst"


def test_a_partition_waiting_its_turn_in_the_consumer_queue_is_not_quiet(tmp_path):
    """In a catch-up of several partitions, one may get nothing for a while because the
    consumer's queue holds the others' records first; its burst has not ended."""
    o, cfg = owner(tmp_path)
    o.feed(0, records(0, 500))
    o.port.waiting.add(0)
    o.now += 5.0
    o.coordinator.flush_idle()
    o.tick(0.0)
    o.deliver()
    assert published(o, cfg) == 0, "the broker has more of partition 0: not the end of the burst"
    o.port.waiting.discard(0)
    o.coordinator.flush_idle()
    o.deliver()
    assert published(o, cfg) == 500
