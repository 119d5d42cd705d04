"""The fence between two owners of one partition, held by a real NameNode.

The zombie of tests/pipeline/test_fencing.py (an owner that lost its partition without
noticing) and the new owner start from the same committed state on a ``webhdfs://`` root
of the real cluster. Their files get the same names, so exactly one RENAME of each name
succeeds: the NameNode answers ``false`` to the other (a rename never replaces a file),
the backend settles that as a conflict from the namespace, the loser drops its writers,
re-reads the state and seeks, and every record is held once. End to end, with real
processes, the zombie frozen past its session timeout is in test_hdfs_exactly_once.py;
there the zombie may notice its loss before it publishes, here the stale publish is
certain.
"""

from __future__ import annotations

from garmexport.storage.open import open_storage
from tests.hdfs.conftest import USER, HdfsRoot
from tests.pipeline.harness import Owner
from tests.pipeline.test_fencing import config, held_exactly_once, records
from tests.storage.conftest import options


def test_the_namenode_lets_exactly_one_owner_publish_each_stretch(
        hdfs_root: HdfsRoot, tmp_path) -> None:
    recs = records(1200)
    zombie_cfg, owner_cfg = config(tmp_path, 50), config(tmp_path, 80)
    storage = open_storage(hdfs_root.uri, "shared", options({"hdfs_user": USER}))
    try:
        zombie, owner = Owner(zombie_cfg, storage), Owner(owner_cfg, storage)
        assert zombie.coordinator.assign([0]) == {0: None}
        assert owner.coordinator.assign([0]) == {0: None}
        zombie.feed(0, recs[:600])  # publishes files of 50 rows as they fill
        zombie.tick()
        owner.feed(0, recs[:600])  # its first publish collides with the zombie's name
        assert owner.fenced >= 1, "the NameNode must have refused the second owner's name"
        assert owner.port.seeks, "a fenced owner seeks to the re-read committed position"
        partition, seek = owner.port.seeks[-1]
        assert partition == 0 and 0 <= seek <= 600
        owner.feed(0, recs[seek:])
        zombie.feed(0, recs[600:900])  # the zombie still writes a while, and loses
        owner.finish()
        zombie.finish()
        held_exactly_once(storage, owner_cfg.source.topic, 1200)
    finally:
        storage.close()
