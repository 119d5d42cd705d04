"""Open files cost the process what the memory budget counts for them, not several times it.

Late events make many chains that grow by a few rows per batch. Held as Arrow tables, each
such piece cost ~12-27 KiB of native memory per ~1 KiB of values, invisible to the budget
(RSS 207 MiB against a 149 MiB bound in the memory benchmark). This test measures the
process's RSS while thousands of small pieces are open and holds it to their count.
"""

from __future__ import annotations

import gc
import os

from garmexport.settings.load import load_config
from garmexport.storage.local import LocalStorage
from tests.pipeline.harness import Owner, every_type_by_partition

MiB = 1024 * 1024
PARTITIONS = 16
BATCH = 8


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_rss_of_many_small_open_pieces_stays_within_what_the_budget_counts(tmp_path):
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
        "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "100000",
        "GARMEXPORT_WRITER_IDLE_FLUSH_S": "0",
        "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "1",  # every feed is its own piece
    })
    owner = Owner(cfg, LocalStorage(str(tmp_path / "out"), "x"))
    owner.coordinator.assign(range(PARTITIONS))
    by_partition = every_type_by_partition(PARTITIONS, 24_000)
    # warm up: every type decoded and published once (decoders and the Parquet writer load
    # a fixed ~17 MiB on first use, which no budget is about), then nothing open
    for p, recs in by_partition.items():
        owner.feed(p, recs[:200])
    owner.coordinator.flush_all()
    owner.deliver()
    assert not any(len(w._files) for w in owner.writers.values())
    gc.collect()
    before = _rss()
    longest = max(len(v) for v in by_partition.values())
    for start in range(200, longest, BATCH):
        for p, recs in by_partition.items():
            if recs[start:start + BATCH]:
                owner.feed(p, recs[start:start + BATCH])
    gc.collect()
    grown = _rss() - before
    files = [w._files for w in owner.writers.values()]
    counted = sum(f.buffered_bytes for f in files)
    pieces = sum(len(f.get(k).pieces) for f in files for k in f.keys())
    assert pieces >= 15_000, "the workload must hold many small pieces open"
    assert counted >= 16 * MiB, counted
    print(f"RSS +{grown / MiB:.1f} MiB, counted {counted / MiB:.1f} MiB, {pieces} pieces")
    assert grown <= 1.25 * counted + 8 * MiB, (grown / MiB, counted / MiB, pieces)
