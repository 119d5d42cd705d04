"""Two owners of one partition starting from the same committed state: the fence holds.

A zombie (an owner that lost the partition without noticing) and the new owner read the
same records and flush at different moments. Exclusive publish of names decided by the
committed state lets exactly one of them commit each stretch; the loser drops its writers,
re-reads the state and seeks, and the output ends exact.
"""

from __future__ import annotations

import random

import pyarrow.parquet as pq

from garmexport.settings.load import load_config
from garmexport.wire.events import EXPORTED
from garmexport.wire.frames import encode
from garmexport.storage.local import LocalStorage
from garmexport.verify.count import read_output
from tests.pipeline.harness import FakeRecord, Owner

NOW_MS = 1_795_300_000_000
DAY_MS = 86_400_000


def records(n: int, seed: int = 7, start: int = 0) -> list[FakeRecord]:
    rng = random.Random(seed)
    out = []
    for off in range(start, start + n):
        t = rng.choice(EXPORTED[:4])
        ts = NOW_MS - rng.choice((0, 0, 0, DAY_MS, 2 * DAY_MS)) - rng.randint(0, 1000)
        value = b"junk" if off % 97 == 0 else encode(t.marker, ts, b"", b"")
        out.append(FakeRecord(off, value, NOW_MS))
    return out


def config(tmp_path, rows: int):  # noqa: ANN001, ANN201
    return load_config(None, {
        "GARMEXPORT_OUTPUT_ROOT": str(tmp_path / "out"),
        "GARMEXPORT_WRITER_MAX_FILE_ROWS": str(rows),
        "GARMEXPORT_WRITER_MAX_FILE_AGE_S": "1000",
        "GARMEXPORT_WRITER_DECODE_BATCH_RECORDS": "100",
    })


def held_exactly_once(storage: LocalStorage, topic: str, n: int) -> None:
    held, _ = read_output(storage, topic)
    dups = sorted(o for (_, o), ds in held.items() if len(ds) > 1)
    missing = sorted(set(range(n)) - {o for (_, o) in held})
    assert not dups, f"duplicated offsets {dups[:20]}"
    assert not missing, f"lost offsets {missing[:20]}"


def test_exactly_one_owner_wins_each_stretch_and_the_loser_resyncs(tmp_path):
    recs = records(3000)
    zombie_cfg, owner_cfg = config(tmp_path, 50), config(tmp_path, 80)
    storage = LocalStorage(str(tmp_path / "out"), "shared")
    zombie, owner = Owner(zombie_cfg, storage), Owner(owner_cfg, storage)
    assert zombie.coordinator.assign([0]) == {0: None}
    assert owner.coordinator.assign([0]) == {0: None}  # same committed state: nothing yet
    zombie.feed(0, recs[:1500])  # publishes files of 50 rows as they fill
    zombie.tick()
    owner.feed(0, recs[:1500])  # its first publish collides with the zombie's name
    assert owner.fenced >= 1, "the second owner must have been fenced"
    assert owner.port.seeks, "a fenced owner seeks to the re-read committed position"
    partition, seek = owner.port.seeks[-1]
    assert partition == 0 and 0 <= seek <= 1500  # open chains near 0 hold W down: skips do the rest
    owner.feed(0, recs[seek:])  # the resynced owner goes on from where the state says
    zombie.feed(0, recs[1500:2000])  # the zombie still writes a while, and loses
    owner.finish()
    zombie.finish()
    held_exactly_once(storage, owner_cfg.source.topic, 3000)


def test_a_resynced_owner_skips_what_the_winner_published_after_the_seek(tmp_path):
    recs = records(2000, seed=3)
    a_cfg, b_cfg = config(tmp_path, 40), config(tmp_path, 1000)
    storage = LocalStorage(str(tmp_path / "out"), "shared")
    a, b = Owner(a_cfg, storage), Owner(b_cfg, storage)
    a.coordinator.assign([0])
    b.coordinator.assign([0])
    b.feed(0, recs[:2000])  # b buffers everything (1000-row files), nothing published yet
    a.feed(0, recs[:2000])  # a publishes many small files first
    a.finish()
    b.finish()  # every one of b's names collides, or its content is skipped after resync
    assert b.fenced >= 1
    if b.port.seeks:
        _, seek = b.port.seeks[-1]
        b.feed(0, recs[seek:])
        b.finish()
    held_exactly_once(storage, a_cfg.source.topic, 2000)
    files = list((tmp_path / "out").glob("*/day=*/*.parquet"))
    assert files and all(pq.read_metadata(f).num_rows > 0 for f in files)


def test_a_fenced_writer_publishes_nothing_more_until_it_is_reset(tmp_path):
    from garmexport.pipeline.messages import Batch
    from garmexport.pipeline.origin_writer import OriginWriter
    from garmexport.protocol.resume import OriginState

    cfg = config(tmp_path, 10)
    storage = LocalStorage(str(tmp_path / "out"), "shared")
    fs = EXPORTED[0]
    frames = [encode(fs.marker, NOW_MS, b"", b"") for _ in range(40)]

    def batch(lo: int, hi: int) -> Batch:
        return Batch(1, hi - 1, tuple(range(lo, hi)), tuple(frames[lo:hi]), (NOW_MS,) * (hi - lo),
                     (NOW_MS // DAY_MS,) * (hi - lo), (), sum(map(len, frames[lo:hi])))

    winner = OriginWriter(cfg, storage, fs.output, 0)
    winner.reset(1, OriginState(-1, {}), -1)
    winner.handle_batch(batch(0, 15))  # publishes offsets 0..9
    loser = OriginWriter(cfg, storage, fs.output, 0)
    loser.reset(1, OriginState(-1, {}), -1)
    report = loser.handle_batch(batch(0, 15))
    assert report.fenced_path is not None and report.published == ()
    files_before = sorted((tmp_path / "out").rglob("*.parquet"))
    later = loser.handle_batch(batch(15, 40))  # queued before the resync reached it
    assert later.published == () and later.open_first is None
    assert sorted((tmp_path / "out").rglob("*.parquet")) == files_before
