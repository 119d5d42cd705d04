"""Reports taken together (the reader actor takes what the executor made since its last look)
leave the reader where the same reports one by one leave it."""

from __future__ import annotations

import time

from garmexport.settings.load import load_config
from garmexport.storage.local import LocalStorage
from garmexport.testbed.generator import Spec, generate
from garmexport.verify.count import read_output
from tests.pipeline.harness import FakeRecord, Owner


def test_reports_taken_together_move_w_and_publish_as_one_by_one(tmp_path):
    spec = Spec(now_ms=int(time.time() * 1000), partitions=2, days=3, late_share=0.1,
                bad_share=0.01)
    by_partition: dict[int, list[FakeRecord]] = {0: [], 1: []}
    for r in generate(spec, 6000):
        recs = by_partition[r.partition]
        recs.append(FakeRecord(len(recs), r.value, r.timestamp_ms))
    owners = []
    for together in (False, True):
        root = tmp_path / str(together)
        cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(root),
                                 "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "200",
                                 "GARMEXPORT_WRITER_MAX_FILE_ROWS": "300",
                                 "GARMEXPORT_WRITER_MAX_BUFFERED_BYTES": "400000"})
        owners.append((Owner(cfg, LocalStorage(str(root), "x"), reports_together=together),
                       cfg))
    for o, _ in owners:
        o.coordinator.assign([0, 1])
    for start in range(0, 3000, 500):
        for o, _ in owners:
            for p in (0, 1):
                o.feed(p, by_partition[p][start:start + 500])
            o.tick(1.5)
        (one, _), (together, _) = owners
        assert one.coordinator.seek_positions() == together.coordinator.seek_positions()
    for o, _ in owners:
        o.finish()
    (one, cfg), (together, _) = owners
    assert one.coordinator.seek_positions() == together.coordinator.seek_positions()
    held = [read_output(o.storage, cfg.source.topic)[0] for o, _ in owners]
    assert held[0] == held[1] and len(held[0]) > 0
    files = [sorted(str(f.relative_to(tmp_path / str(together)))
                    for f in (tmp_path / str(together)).rglob("*.parquet"))
             for together in (False, True)]
    assert files[0] == files[1] and len(files[0]) > 10
