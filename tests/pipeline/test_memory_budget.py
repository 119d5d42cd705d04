"""Memory stays within the configured budget, whatever the number of open writers.

Every type in 16 partitions over 3 days means ~850 chains open at once; with a budget of
400 kB or 200 open files, the reader must keep flushing the writers
holding the oldest files so that the buffered bytes and open files stay bounded.
"""

from __future__ import annotations

import time

import pytest

from garmexport.settings.load import load_config
from garmexport.testbed.generator import Spec, generate
from garmexport.storage.local import LocalStorage
from garmexport.verify.count import read_output
from tests.pipeline.harness import FakeRecord, Owner, every_type_by_partition

PARTITIONS = 16
BUDGET_BYTES = 400_000
MAX_OPEN = 200
BATCH = 64


@pytest.mark.parametrize("pressed", ["bytes", "files"])
def test_buffered_bytes_and_open_files_stay_within_the_budget(tmp_path, pressed):
    budget_bytes = BUDGET_BYTES if pressed == "bytes" else 10**9
    max_open = MAX_OPEN if pressed == "files" else 10**6
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
        "GARMEXPORT_WRITER_MAX_BUFFERED_BYTES": str(budget_bytes),
        "GARMEXPORT_WRITER_MAX_OPEN_FILES": str(max_open),
        "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "100000",
        "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "1",  # hand every feed over at once
    })
    storage = LocalStorage(str(tmp_path / "out"), "x")
    owner = Owner(cfg, storage)
    owner.coordinator.assign(range(PARTITIONS))
    by_partition = every_type_by_partition(PARTITIONS, 4_000)
    worst_bytes = worst_files = 0
    batch_bytes = 0
    for start in range(0, max(len(v) for v in by_partition.values()), BATCH):
        for p, recs in by_partition.items():
            chunk = recs[start:start + BATCH]
            if chunk:
                batch_bytes = max(batch_bytes, sum(len(r.value() or b"") for r in chunk))
                owner.feed(p, chunk)
                owner.deliver()
                files = [w._files for w in owner.writers.values()]
                worst_bytes = max(worst_bytes, sum(f.buffered_bytes for f in files))
                worst_files = max(worst_files, sum(len(f) for f in files))
    # one batch may land on top of the budget before the reader asks for a flush
    assert worst_files <= max_open + BATCH, worst_files
    assert worst_bytes <= budget_bytes + 4 * batch_bytes, (worst_bytes, batch_bytes)
    if pressed == "files":
        assert worst_files > MAX_OPEN // 2, "the workload must press on the open-file budget"
    else:
        assert worst_bytes > BUDGET_BYTES // 2, "the workload must press on the byte budget"
    owner.finish()
    held, _ = read_output(storage, cfg.source.topic)
    total = sum(len(v) for v in by_partition.values())
    assert sum(len(v) for v in held.values()) == total and all(len(v) == 1 for v in held.values())


def test_records_gathered_for_the_writers_count_against_the_byte_budget(tmp_path):
    """Records the reader holds back to make a larger batch are memory too: when they and the
    open files are over the byte budget, the oldest files are published."""
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
        "GARMEXPORT_WRITER_MAX_BUFFERED_BYTES": "300000",
        "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "100000",
        "GARMEXPORT_WRITER_IDLE_FLUSH_S": "0",
        "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "1000000",
        "GARMEXPORT_WRITER_DECODE_BATCH_WAIT_S": "1000",
    })
    storage = LocalStorage(str(tmp_path / "out"), "x")
    owner = Owner(cfg, storage)
    owner.coordinator.assign([0, 1])
    # the first 300 records cover the first tenth of the day before now_ms; now_ms at 18:00
    # UTC keeps them in one UTC day (with the wall clock, from 21:36 UTC on they crossed
    # midnight, and the writer held two open files, one per day)
    today_ms = int(time.time() * 1000) // 86_400_000 * 86_400_000
    spec = Spec(now_ms=today_ms + 18 * 3_600_000, partitions=1, days=1, late_share=0.0,
                mix={"FS_EVENT": 1.0})
    records = [FakeRecord(i, r.value, r.timestamp_ms) for i, r in enumerate(generate(spec, 3000))]
    owner.feed(1, records[:300])
    owner.tick(2000)  # past decode_batch_wait_s: partition 1's records go to its writer
    [writer] = [w for (o, p), w in owner.writers.items() if p == 1]
    assert len(writer._files) == 1 and writer._files.buffered_bytes < 300_000
    gathered = records[:2000]
    assert sum(len(r.value()) for r in gathered) > 300_000
    owner.feed(0, gathered)  # held back: far from a full decode batch, not old
    assert not any(p == 0 for _, p in owner.writers)
    assert len(writer._files) == 0, "the open file should be published to make room"
    assert list((tmp_path / "out").glob("fs/day=*/*.parquet"))
