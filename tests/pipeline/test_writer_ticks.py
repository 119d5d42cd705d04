"""The timer ticks only the writers it can move: a file past its age, a failing store.

Every tick is a message, a job on the writers' executor and a report back; sent to every
writer every second, they were work that moved nothing while files were young.
"""

from __future__ import annotations

from garmexport.pipeline.messages import Tick
from garmexport.settings.load import load_config
from garmexport.storage.local import LocalStorage
from garmexport.verify.count import read_output
from garmexport.wire.events import EXPORTED
from garmexport.wire.frames import encode
from tests.pipeline.harness import FakeRecord, Owner

NOW_MS = 1_795_300_000_000


def ticks(o: Owner) -> int:
    return sum(isinstance(msg, Tick) for _, _, msg in o.queue)


def test_writers_get_a_tick_only_once_their_oldest_file_is_past_its_age(tmp_path):
    cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
                             "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "10",
                             "GARMEXPORT_WRITER_IDLE_FLUSH_S": "0"})
    o = Owner(cfg, LocalStorage(str(tmp_path / "out"), "x"))
    o.coordinator.assign([0])
    records = [FakeRecord(i, encode(t.marker, NOW_MS, b"", b""), NOW_MS)
               for i, t in enumerate(EXPORTED[:3])]
    o.feed(0, records)
    o.now += 1.0
    o.coordinator.tick()  # the gathered records leave; no writer has reported an open file yet
    assert ticks(o) == 0
    o.deliver()
    for _ in range(9):  # three files open since 1.0 s, none 10 s old up to 10.0 s
        o.now += 1.0
        o.coordinator.tick()
        assert ticks(o) == 0
        o.deliver()
    o.now += 1.0
    o.coordinator.tick()
    assert ticks(o) == 3
    o.deliver()
    held, _ = read_output(o.storage, cfg.source.topic)
    assert len(held) == 3, "each file published by its age, on the tick"
    o.now += 1.0
    o.coordinator.tick()
    assert ticks(o) == 0, "nothing open any more"
