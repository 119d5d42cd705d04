"""Finishing a crashed run's swap before Spark starts: only when no Spark is needed, under
the lease, and left to the Spark run otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from garmexport.compaction import before_spark
from garmexport.compaction.fs import LocalFs
from garmexport.compaction.names import LEASE_DIR, journal_path
from garmexport.compaction.recover import commit_swap
from garmexport.compaction.swap import Journal
from garmexport.hive.tables import TableNaming
from tests.unit.compaction.test_swap_view import DAY, DAYNAME, OUT, VIEW, make


class Crash(Exception):
    pass


def crashed_swap(root: Path, view: bool) -> Journal:
    """A swap on a local disk whose run died right after its commit point."""
    journal, world = make(2, 3)
    if not view:
        journal = Journal(journal.output, journal.day, journal.generation, journal.staging,
                          journal.moves, journal.deletes)
    fs = LocalFs(str(root))
    for p, v in world.fs.files.items():
        fs.write(p, v)

    def die(step: str) -> None:
        if step == "after-journal":
            raise Crash
    with pytest.raises(Crash):
        commit_swap(fs, journal, die, lambda o, d, p: None, 1000)
    return journal


def finish(root: str, metastore_uri: str = "", output_root: str = "") -> before_spark.Recovered:
    return before_spark.finish_swaps(root, output_root or root, None, metastore_uri, 5.0,
                                     TableNaming(), 5.0, 1000)


def test_a_journaled_swap_on_a_local_root_is_finished_without_spark(tmp_path: Path) -> None:
    journal = crashed_swap(tmp_path, view=False)
    done = finish(LocalFs(str(tmp_path)).uri)
    assert (done.rolled_forward, done.rolled_back) == (1, 0)
    fs = LocalFs(str(tmp_path))
    names = {f"{DAY}/{e.name}" for e in fs.list(DAY)}
    assert {m.final for m in journal.moves} <= names
    assert not names & set(journal.deletes)
    assert not (tmp_path / journal_path(OUT, DAYNAME, 3)).exists()
    leases = [e.name for e in fs.list(LEASE_DIR) if not e.name.startswith(".")]
    assert len(leases) == 1
    assert b'"expires_at_ms": 0' in fs.read(f"{LEASE_DIR}/{leases[0]}")  # released


def test_flips_without_a_metastore_uri_are_left_to_the_spark_run(tmp_path: Path) -> None:
    journal = crashed_swap(tmp_path, view=True)
    assert finish(LocalFs(str(tmp_path)).uri) == before_spark.NOTHING
    assert (tmp_path / journal_path(OUT, DAYNAME, 3)).exists()  # untouched
    assert all((tmp_path / p).exists() for p in journal.deletes)
    assert not (tmp_path / VIEW).exists()
    assert not (tmp_path / LEASE_DIR).exists()  # not even the lease was taken


def test_a_metastore_that_does_not_answer_leaves_the_swap_to_the_spark_run(
        tmp_path: Path) -> None:
    from garmexport.testbed.embedded_broker import free_port

    journal = crashed_swap(tmp_path, view=True)
    done = finish(LocalFs(str(tmp_path)).uri, f"thrift://127.0.0.1:{free_port()}")
    assert done == before_spark.NOTHING
    assert (tmp_path / journal_path(OUT, DAYNAME, 3)).exists()  # the journal still commits
    # the steps before the first flip may have run; they are the idempotent ones
    assert all((tmp_path / p).exists() for p in journal.deletes)


def test_a_root_spark_reaches_as_hdfs_is_finished_through_the_exporters_storage(
        tmp_path: Path) -> None:
    journal = crashed_swap(tmp_path, view=False)
    done = finish("hdfs://namenode/data/garmadon", output_root=str(tmp_path))
    assert done.rolled_forward == 1
    fs = LocalFs(str(tmp_path))
    names = {f"{DAY}/{e.name}" for e in fs.list(DAY)}
    assert {m.final for m in journal.moves} <= names and not names & set(journal.deletes)
    assert not (tmp_path / journal.staging).exists()  # the staging tree, emptied and gone
    assert not (tmp_path / journal_path(OUT, DAYNAME, 3)).exists()


def test_a_clean_root_is_left_alone(tmp_path: Path) -> None:
    assert finish(LocalFs(str(tmp_path)).uri) == before_spark.NOTHING
    assert not (tmp_path / LEASE_DIR).exists()  # no journal: not even the lease is taken


def test_store_fs_keeps_the_file_ops_contract(tmp_path: Path) -> None:
    from garmexport.compaction.store_fs import StoreFs
    from garmexport.errors import StorageError
    from garmexport.storage.local import LocalStorage

    fs = StoreFs(LocalStorage(str(tmp_path), "compact"), "hdfs://nn/root/")
    assert fs.uri == "hdfs://nn/root"
    fs.write("a/x.json", b"1")
    fs.write("a/x.json", b"2")  # replaces
    assert fs.read("a/x.json") == b"2"
    fs.copy("a/x.json", "b/c/y.json")
    fs.rename("a/x.json", "b/z.json")
    assert [e.name for e in fs.list("a")] == [] and fs.read("b/z.json") == b"2"
    with pytest.raises(StorageError):
        fs.rename("b/z.json", "b/c/y.json")  # never overwrites
    with pytest.raises(StorageError):
        fs.copy("b/missing", "b/w")
    assert fs.read("b/z.json") == b"2" and fs.read("b/c/y.json") == b"2"
    fs.delete_tree("b")
    assert not (tmp_path / "b").exists()
    fs.delete_tree("b")  # missing: fine


def test_two_retries_at_once_finish_the_swap_once(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    journal = crashed_swap(tmp_path, view=False)
    root = LocalFs(str(tmp_path)).uri
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda _: finish(root), range(2)))
    assert sorted(d.rolled_forward for d in done) == [0, 1]  # the second found it done
    names = {f"{DAY}/{e.name}" for e in LocalFs(str(tmp_path)).list(DAY)}
    assert {m.final for m in journal.moves} <= names and not names & set(journal.deletes)
