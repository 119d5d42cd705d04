"""Failures are logged at WARNING with their reason, never at INFO without one.

The reader and its writers run on a real local store whose root is then replaced by a
plain file, so every publish and marker write fails with a real ``NotADirectoryError``.
Before, ``publish_failed`` had no reason (one ``store_failing`` line per episode replaces
it now), and it, ``marker_failed``, ``paused
reason="store failing"`` and ``lost`` were all INFO.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from garmexport.settings.load import load_config
from garmexport.wire.events import EXPORTED
from garmexport.wire.frames import encode
from garmexport.storage.local import LocalStorage
from tests.pipeline.harness import FakeRecord, Owner

NOW_MS = 1_795_300_000_000


def fields(caplog: pytest.LogCaptureFixture, event: str) -> list[tuple[int, dict]]:
    return [(r.levelno, getattr(r, "garmexport_fields", {})) for r in caplog.records
            if r.getMessage() == event]


def test_store_failures_and_lost_partitions_are_warnings_with_a_reason(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "out"
    cfg = load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(root), "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "1",
        "GARMEXPORT_PROTOCOL_HEARTBEAT_INTERVAL_S": "1", "GARMEXPORT_STORAGE_RETRY_ATTEMPTS": "100",
    })
    o = Owner(cfg, LocalStorage(str(root), "x"))
    o.coordinator.assign([0])
    t = EXPORTED[0]
    o.feed(0, [FakeRecord(n, encode(t.marker, NOW_MS, b"", b""), NOW_MS) for n in range(50)])
    shutil.rmtree(root)
    root.write_text("the store is gone")  # every path under it fails: Not a directory
    caplog.set_level(logging.DEBUG, logger="garmexport")
    for _ in range(4):
        o.tick(advance_s=2.0)

    [(level, failed)] = fields(caplog, "store_failing")  # one line for the whole episode
    assert level == logging.WARNING
    assert "StorageError" in failed["reason"] and "Not a directory" in failed["reason"], failed
    [(level, paused)] = fields(caplog, "paused")
    assert level == logging.WARNING and "Not a directory" in paused["reason"], paused
    markers = fields(caplog, "marker_failed")
    assert markers and all(level == logging.WARNING for level, _ in markers)
    assert all("Not a directory" in f["error"] for _, f in markers), markers

    o.coordinator.revoke([0], lost=True)
    [(level, lost)] = fields(caplog, "lost")
    assert level == logging.WARNING and lost["reason"] and lost["partitions"] == [0]
