"""The export path leaves no reference cycles behind.

``garmexport run`` raises the garbage collector's thresholds (run_export.GC_THRESHOLDS)
because the collector cost up to 8 % of the CPU while finding nothing to free. That is
only safe while the hot path creates no cyclic garbage: a cycle holding a batch's
payloads would then live much longer and raise memory. This feeds generated records of
every type, bad ones included, through the reader and writers and checks the collector
finds nothing.
"""

from __future__ import annotations

import gc

from garmexport.settings.load import load_config
from garmexport.testbed.generator import DEFAULT_MIX, Spec, generate
from garmexport.storage.local import LocalStorage
from tests.pipeline.harness import FakeRecord, Owner


def test_routing_decoding_and_publishing_leave_no_cyclic_garbage(tmp_path):
    spec = Spec(now_ms=1_795_300_000_000, partitions=2, days=3, late_share=0.05,
                mix=dict(DEFAULT_MIX), bad_share=0.02)
    offsets: dict[int, int] = {}
    by_partition: dict[int, list[FakeRecord]] = {}
    for r in generate(spec, 30_000):
        o = offsets.get(r.partition, 0)
        offsets[r.partition] = o + 1
        by_partition.setdefault(r.partition, []).append(FakeRecord(o, r.value, r.timestamp_ms))
    def owner(root):
        root.mkdir()
        cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(root),
                                 "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "2000"})
        o = Owner(cfg, LocalStorage(str(root), "x"))
        o.coordinator.assign(sorted(by_partition))
        return o

    # What runs once per process is not the hot path: the first Arrow array made from a
    # numpy array imports numpy.ma, whose import leaves cycles (inspect's signature
    # parser). A first pass over other output takes those, whichever tests ran before.
    warm = owner(tmp_path / "warm")
    for p, records in by_partition.items():
        warm.feed(p, records[:3_000])
    warm.finish()
    o = owner(tmp_path / "measured")
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for start in range(0, 30_000, 3_000):
            for p, records in by_partition.items():
                o.feed(p, records[start:start + 3_000])
        o.finish()
        gc.collect()
        kinds = sorted({type(x).__name__ for x in gc.garbage})
        functions = sorted({x.__qualname__ for x in gc.garbage if callable(x) and hasattr(x, "__qualname__")})
        assert not gc.garbage, f"cyclic garbage: {kinds}; functions: {functions}"
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
