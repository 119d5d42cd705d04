"""Every refused publish is seen, and a failed publish reports its own error.

- A zombie whose partition moved on while it was busy publishes into names the new owner
  already committed: each refusal is counted (``fencing_conflicts_total``) and logged
  (``fenced``), even when the report arrives after the assignment was lost.
- A publish that fails after staging, on a store that has also become unwritable for the
  clean-up, raises the publish's error, not the clean-up's.
"""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from garmexport.errors import StorageError
from garmexport.observe.metrics import Metrics
from garmexport.protocol.naming import MarkerName
from garmexport.pipeline.publisher import write_marker
from garmexport.protocol.resume import Marker
from garmexport.storage.local import LocalStorage
from tests.disk_faults import Frozen, require_immutable
from tests.pipeline.harness import Owner
from tests.pipeline.test_fencing import config, held_exactly_once, records


def test_refused_publishes_of_a_zombie_that_lost_its_partition_are_counted(tmp_path, caplog):
    recs = records(1000, seed=11)
    storage = LocalStorage(str(tmp_path / "out"), "shared")
    zombie_cfg = owner_cfg = config(tmp_path, 50)
    zombie, owner = Owner(zombie_cfg, storage), Owner(owner_cfg, storage)
    registry = CollectorRegistry()
    zombie.coordinator.metrics = zombie.coordinator.markers.metrics = Metrics.create(registry)
    zombie.coordinator.assign([0])
    owner.coordinator.assign([0])
    owner.feed(0, recs)
    owner.finish()  # the new owner committed every stretch

    # the zombie routes the same records and asks for a flush, then loses the partition;
    # its writers only get to the queued work afterwards (frozen meanwhile)
    zombie.coordinator.records(0, recs)
    zombie.coordinator.flush_all()
    zombie.coordinator.revoke([0], lost=True)
    with caplog.at_level(logging.INFO, logger="garmexport.pipeline"):
        zombie.deliver()
    assert zombie.fenced >= 1
    fenced = [r for r in caplog.records if r.getMessage() == "fenced"]
    counted = registry.get_sample_value("garmexport_fencing_conflicts_total", {"partition": "0"})
    assert counted == zombie.fenced, (counted, zombie.fenced)
    assert len(fenced) == zombie.fenced
    held_exactly_once(storage, owner_cfg.source.topic, 1000)


class _FreezesAfterStage(LocalStorage):
    """The store becomes unwritable right after a file is staged (a real fault, at the
    moment a process frozen in its fsync would meet it)."""

    frozen: Frozen

    def stage(self, data: bytes):  # noqa: ANN201
        staged = super().stage(data)
        self.frozen.freeze()
        return staged


def test_a_failed_publish_reports_its_error_not_the_failed_clean_up(tmp_path) -> None:
    require_immutable(tmp_path)
    out = tmp_path / "out"
    storage = _FreezesAfterStage(str(out), "inst")
    storage.frozen = Frozen(out)
    marker = Marker(partition=0, low={}, last={}, processed=-1, written_at_ms=0)
    try:
        with pytest.raises(StorageError) as failed:
            write_marker(storage, "local", "t", MarkerName("inst", 1), marker)
    finally:
        storage.frozen.thaw()
    assert "cannot publish" in str(failed.value), failed.value
    assert "cannot remove" not in str(failed.value)
