"""``protocol.marker_keep``: how many markers of a partition stay after a marker is written."""

from __future__ import annotations

import pytest

from garmexport.settings.load import load_config
from garmexport.protocol.naming import MarkerName, partition_dir
from garmexport.pipeline.recovery import read_partition_state
from garmexport.storage.local import LocalStorage
from tests.pipeline.harness import Owner
from tests.pipeline.test_fencing import held_exactly_once, records


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_a_partition_keeps_the_newest_markers_and_resumes_the_same(tmp_path, keep: int) -> None:
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
        "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "1000",
        "GARMEXPORT_PROTOCOL_MARKER_KEEP": str(keep),
    })
    storage = LocalStorage(str(tmp_path / "out"), "e1")
    owner = Owner(cfg, storage)
    owner.coordinator.assign([0])
    recs = records(400)
    written: list[MarkerName] = []
    for start in range(0, 400, 100):  # four rounds, each ending with a (forced) marker
        owner.feed(0, recs[start:start + 100])
        owner.now += 1.0
        owner.finish()
        pdir = partition_dir(cfg.source.cluster, cfg.source.topic, 0)
        names = sorted(n for e in storage.list(pdir) if (n := MarkerName.parse(e.name)))
        written.extend(n for n in names if n not in written)
        assert names == written[-keep:], f"round {start // 100}: {names}"
    assert len(written) == 4
    assert read_partition_state(storage, cfg.source.cluster, cfg.source.topic, 0
                                ).state.seek() == 400
    held_exactly_once(storage, cfg.source.topic, 400)
