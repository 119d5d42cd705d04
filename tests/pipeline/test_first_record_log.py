"""``first_record`` is logged at INFO once per process, when the first record arrives.

The pipeline benchmark times the steady state from it (first record received to last file
published), so the group join is not in the headline; it must come once, not per poll.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from garmexport.settings.load import load_config
from garmexport.wire.events import EXPORTED
from garmexport.wire.frames import encode
from garmexport.storage.local import LocalStorage
from tests.pipeline.harness import FakeRecord, Owner

NOW_MS = 1_795_300_000_000


def test_first_record_is_logged_once_with_its_partition_and_offset(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "out"
    cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(root)})
    o = Owner(cfg, LocalStorage(str(root), "x"))
    caplog.set_level(logging.INFO, logger="garmexport")
    o.coordinator.assign([0, 1])
    cpu_before = time.process_time()
    assert not [r for r in caplog.records if r.getMessage() == "first_record"]
    o.feed(1, [])  # an empty poll is no record
    frame = encode(EXPORTED[0].marker, NOW_MS, b"", b"")
    o.feed(1, [FakeRecord(n, frame, NOW_MS) for n in range(7, 10)])
    o.feed(0, [FakeRecord(n, frame, NOW_MS) for n in range(5)])
    o.feed(1, [FakeRecord(n, frame, NOW_MS) for n in range(10, 12)])

    [found] = [r for r in caplog.records if r.getMessage() == "first_record"]
    fields = dict(found.garmexport_fields)
    cpu_s = fields.pop("process_cpu_s")  # CPU so far: the benchmark subtracts it
    assert (found.levelno, fields) == (logging.INFO, {"partition": 1, "offset": 7})
    # the line rounds to 3 decimals, which may round up: allow half a unit each way
    half_unit = 0.0005
    assert cpu_s > 0 and cpu_before - half_unit <= cpu_s <= time.process_time() + half_unit
