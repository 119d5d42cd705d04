"""The retry counters tell the truth: every failed attempt counts once, every retry once.

The output root is made unwritable (every entry immutable, a real fault) for a while,
then writable again. Every failed attempt was followed by a retry and the export
recovered, so ``storage_failures_total - storage_retries_total`` (calls given up) is 0.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from garmexport.settings.load import load_config
from garmexport.wire.events import EXPORTED
from garmexport.wire.frames import encode
from garmexport.observe.metrics import Metrics
from garmexport.storage.local import LocalStorage
from garmexport.verify.count import read_output
from tests.disk_faults import frozen
from tests.pipeline.harness import FakeRecord, Owner

NOW_MS = 1_795_300_000_000


def test_a_recovered_outage_counts_each_failure_and_its_retry(tmp_path) -> None:
    out = tmp_path / "out"
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(out), "GARMEXPORT_WRITER_MAX_FILE_ROWS": "40",
        "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "1", "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "20",
        "GARMEXPORT_PROTOCOL_HEARTBEAT_INTERVAL_S": "1",
        "GARMEXPORT_STORAGE_RETRY_INITIAL_S": "0.5", "GARMEXPORT_STORAGE_RETRY_MAX_S": "2",
    })
    storage = LocalStorage(str(out), "retries")
    owner = Owner(cfg, storage)
    registry = CollectorRegistry()
    owner.coordinator.metrics = owner.coordinator.markers.metrics = Metrics.create(registry)
    assert owner.coordinator.assign([0]) == {0: None}
    owner.feed(0, [FakeRecord(o, encode(EXPORTED[o % 3].marker, NOW_MS, b"", b""), NOW_MS)
                   for o in range(200)])
    with frozen(out):
        owner.feed(0, [FakeRecord(o, encode(EXPORTED[o % 3].marker, NOW_MS, b"", b""), NOW_MS)
                       for o in range(200, 400)])
        for _ in range(8):
            owner.tick(2.5)
        assert not owner.coordinator.store_ok and owner.coordinator.paused
    for _ in range(3):
        owner.tick(2.5)
    owner.finish()
    assert owner.coordinator.store_ok and not owner.coordinator.paused

    def count(name: str, op: str) -> float:
        return registry.get_sample_value(f"garmexport_{name}_total", {"op": op}) or 0.0

    for op in ("publish", "marker"):
        failures, retries = count("storage_failures", op), count("storage_retries", op)
        print(op, failures, retries)
        assert failures >= 3, (op, failures)
        assert failures == retries, (op, failures, retries)
    held, _ = read_output(storage, cfg.source.topic)
    assert sorted(o for (_, o) in held) == list(range(400))
