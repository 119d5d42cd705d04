"""Every backend keeps the contract of garmexport.storage.base (run once per backend)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from garmexport.errors import PublishConflict
from garmexport.storage.base import ROOT_DIRECTORY, ROOT_MISSING, ROOT_NOT_DIRECTORY, Storage
from garmexport.storage.open import open_storage
from tests.storage.conftest import Backend

REPO = Path(__file__).resolve().parents[2]
DATA = "fs/day=2026-11-01/local+garmadon+00003+00000000000000001000.parquet"


def names(storage: Storage, path: str) -> set[tuple[str, bool]]:
    return {(e.name, e.is_dir) for e in storage.list(path)}


def no_data_visible(storage: Storage) -> bool:
    """Nothing but bookkeeping (names starting with ``_``) at the root."""
    return all(e.name.startswith("_") for e in storage.list(""))


def test_list_shows_files_and_directories_with_sizes(storage: Storage) -> None:
    storage.put_exclusive("fs/day=2026-11-01/a.parquet", b"12345")
    storage.put_exclusive("fs/day=2026-11-01/b.parquet", b"")
    storage.put_exclusive("fs/day=2026-11-02/c.parquet", b"x")
    assert names(storage, "fs") == {("day=2026-11-01", True), ("day=2026-11-02", True)}
    entries = {e.name: e for e in storage.list("fs/day=2026-11-01")}
    assert set(entries) == {"a.parquet", "b.parquet"}
    assert (entries["a.parquet"].size, entries["a.parquet"].is_dir) == (5, False)
    assert entries["b.parquet"].size == 0
    assert abs(entries["a.parquet"].mtime_s - time.time()) < 300


def test_list_of_a_missing_directory_is_empty(storage: Storage) -> None:
    assert storage.list("no/such/dir") == []
    assert storage.list("") == []


def test_read_gives_the_published_bytes_exactly(storage: Storage) -> None:
    payload = bytes(range(256)) * 1000
    storage.put_exclusive(DATA, payload)
    assert storage.read(DATA) == payload
    with pytest.raises(FileNotFoundError):
        storage.read("fs/day=2026-11-01/missing.parquet")


def test_read_tail_gives_the_last_bytes_and_the_size(storage: Storage) -> None:
    storage.put_exclusive("f/x", b"0123456789")
    storage.put_exclusive("f/empty", b"")
    assert storage.read_tail("f/x", 4) == (b"6789", 10)
    assert storage.read_tail("f/x", 10) == (b"0123456789", 10)
    assert storage.read_tail("f/x", 50) == (b"0123456789", 10)
    assert storage.read_tail("f/x", 0) == (b"", 10)
    assert storage.read_tail("f/empty", 8) == (b"", 0)
    with pytest.raises(FileNotFoundError):
        storage.read_tail("f/missing", 8)


def test_read_tail_with_the_listed_size_gives_the_same_bytes(storage: Storage) -> None:
    storage.put_exclusive("f/x", b"0123456789")
    [entry] = storage.list("f")
    for nbytes in (0, 4, 10, 50):
        assert storage.read_tail("f/x", nbytes, entry.size) == storage.read_tail("f/x", nbytes)


def test_exists_is_true_for_files_only(storage: Storage) -> None:
    storage.put_exclusive("d/f", b"x")
    assert storage.exists("d/f")
    assert not storage.exists("d/g")
    assert not storage.exists("d")


def test_publish_makes_the_staged_bytes_visible_under_the_final_name(storage: Storage) -> None:
    staged = storage.stage(b"parquet bytes")
    assert staged.size == len(b"parquet bytes")
    assert not storage.exists(DATA)
    storage.publish(staged, DATA)
    assert storage.read(DATA) == b"parquet bytes"
    assert names(storage, "fs/day=2026-11-01") == {(DATA.rsplit("/", 1)[1], False)}


def test_publish_to_an_existing_name_conflicts_and_changes_nothing(storage: Storage) -> None:
    storage.put_exclusive(DATA, b"winner")
    staged = storage.stage(b"loser")
    with pytest.raises(PublishConflict) as info:
        storage.publish(staged, DATA)
    assert info.value.path == DATA
    assert isinstance(info.value, FileExistsError)
    assert storage.read(DATA) == b"winner"
    storage.discard(staged)
    with pytest.raises(PublishConflict):
        storage.put_exclusive(DATA, b"again")
    assert storage.read(DATA) == b"winner"


def test_racing_threads_publish_one_name_exactly_once(storage: Storage) -> None:
    for round_ in range(3):
        path = f"race/{round_}.parquet"
        staged = [storage.stage(f"writer {i}".encode()) for i in range(6)]
        barrier, outcomes = threading.Barrier(len(staged)), []

        def publish(i: int) -> None:
            barrier.wait()
            try:
                storage.publish(staged[i], path)
                outcomes.append(("won", i))
            except PublishConflict:
                outcomes.append(("lost", i))

        threads = [threading.Thread(target=publish, args=(i,)) for i in range(len(staged))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [i for what, i in outcomes if what == "won"]
        assert len(outcomes) == len(staged) and len(winners) == 1
        assert storage.read(path) == f"writer {winners[0]}".encode()


def _child(backend: Backend, instance: str, mode: str, path: str, data: str,
           go: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.storage.child", backend.root_uri,
         json.dumps(backend.output), instance, mode, path, data, str(go)],
        cwd=REPO, stdout=subprocess.PIPE, text=True)


def test_racing_processes_publish_one_name_exactly_once(storage_backend: Backend,
                                                        tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [_child(storage_backend, f"proc-{i}", "race", DATA, f"process {i}", go)
             for i in range(3)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "staged"
    go.touch()
    results = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert sorted(results) == ["lost", "lost", "won"]
    assert all(p.returncode == 0 for p in procs)
    winner = results.index("won")
    assert storage_backend.storage.read(DATA) == f"process {winner}".encode()


def test_a_staged_file_is_never_visible_among_data(storage: Storage) -> None:
    storage.put_exclusive("fs/day=2026-11-01/a.parquet", b"a")
    staged = storage.stage(b"pending")
    assert names(storage, "fs/day=2026-11-01") == {("a.parquet", False)}
    assert {e.name for e in storage.list("")} <= {"fs", "_tmp"}
    storage.discard(staged)
    storage.discard(staged)  # twice is fine


def test_an_abandoned_stage_shows_nothing_and_gc_removes_it(storage_backend: Backend) -> None:
    storage = storage_backend.storage
    storage.stage(b"abandoned")  # a crash right after stage: publish never comes
    assert no_data_visible(storage)
    other = open_storage(storage_backend.root_uri, "inst-b", storage_backend.options)
    try:
        assert other.gc_temp(older_than_s=3600, now_s=time.time()) == 0  # too young
        removed = other.gc_temp(older_than_s=0, now_s=time.time() + 5)
    finally:
        other.close()
    assert removed == (0 if storage_backend.root_uri.startswith("s3://") else 1)
    assert storage.list("_tmp/inst-a") == []
    assert no_data_visible(storage)


def test_a_process_killed_after_stage_leaves_nothing_visible(storage_backend: Backend,
                                                             tmp_path: Path) -> None:
    proc = _child(storage_backend, "doomed", "hang", DATA, "never published", tmp_path / "go")
    assert proc.stdout is not None and proc.stdout.readline().strip() == "staged"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    storage = storage_backend.storage
    assert not storage.exists(DATA) and no_data_visible(storage)
    storage.gc_temp(older_than_s=0, now_s=time.time() + 5)
    assert storage.list("_tmp/doomed") == []
    storage.put_exclusive(DATA, b"the real one")  # the name is still free
    assert storage.read(DATA) == b"the real one"


def test_delete_removes_a_file_and_ignores_a_missing_one(storage: Storage) -> None:
    storage.put_exclusive("d/f", b"x")
    storage.delete("d/f")
    assert not storage.exists("d/f")
    storage.delete("d/f")
    storage.put_exclusive("d/f", b"y")  # deleted names can be published again
    assert storage.read("d/f") == b"y"


def test_put_exclusive_writes_small_and_empty_files_once(storage: Storage) -> None:
    marker = "_offsets/local+garmadon/00003/m+inst-a+000000000001.json"
    intent = "_offsets/local+garmadon/00003/i+fs+d+2026-11-01+00000000000000001000"
    storage.put_exclusive(marker, b'{"w": 1}')
    storage.put_exclusive(intent, b"")
    assert storage.read(marker) == b'{"w": 1}' and storage.read(intent) == b""
    with pytest.raises(PublishConflict):
        storage.put_exclusive(intent, b"")
    assert len(storage.list("_offsets/local+garmadon/00003")) == 2


@pytest.mark.parametrize("bad", ["../escape", "/", "a//b", "a/./b", ""])
def test_paths_that_could_leave_the_root_are_refused(storage: Storage, bad: str) -> None:
    with pytest.raises(ValueError):
        storage.read(bad)


def test_the_root_is_looked_at_without_being_made_and_made_on_request(
        storage_backend: Backend) -> None:
    """root_state creates nothing (verify, offsets, compact); create_root (run only) makes
    what the backend needs, after which a publish is seen there."""
    root_uri = storage_backend.root_uri.rstrip("/") + "/not-yet"
    fresh = open_storage(root_uri, "inst-b", storage_backend.options, create=False)
    try:
        assert fresh.root_state() == ROOT_MISSING
        assert fresh.root_state() == ROOT_MISSING  # looking made nothing
        assert "not-yet" not in {e.name for e in storage_backend.storage.list("")}
        fresh.create_root()
        fresh.put_exclusive("fs/x", b"1")
        assert fresh.root_state() == ROOT_DIRECTORY
    finally:
        fresh.close()


def test_a_root_that_is_a_file_is_not_a_directory(storage_backend: Backend) -> None:
    if storage_backend.root_uri.startswith("s3://"):
        pytest.skip("an S3 prefix is never a file: a key and a prefix can share a name")
    storage_backend.storage.put_exclusive("plain", b"a file")
    at_file = open_storage(storage_backend.root_uri.rstrip("/") + "/plain", "inst-b",
                           storage_backend.options, create=False)
    try:
        assert at_file.root_state() == ROOT_NOT_DIRECTORY
    finally:
        at_file.close()


#: The cases a module over a cluster of its own collects again (they need nothing of the
#: machine the store runs on: no process of the test's own, no path of the local disk):
#: ``globals().update(REMOTE_CASES)`` there. The secure HDFS modules use it.
REMOTE_CASES = {case.__name__: case for case in (
    test_a_staged_file_is_never_visible_among_data,
    test_an_abandoned_stage_shows_nothing_and_gc_removes_it,
    test_delete_removes_a_file_and_ignores_a_missing_one,
    test_exists_is_true_for_files_only,
    test_list_of_a_missing_directory_is_empty,
    test_list_shows_files_and_directories_with_sizes,
    test_publish_makes_the_staged_bytes_visible_under_the_final_name,
    test_publish_to_an_existing_name_conflicts_and_changes_nothing,
    test_put_exclusive_writes_small_and_empty_files_once,
    test_racing_threads_publish_one_name_exactly_once,
    test_read_gives_the_published_bytes_exactly,
    test_read_tail_gives_the_last_bytes_and_the_size,
    test_read_tail_with_the_listed_size_gives_the_same_bytes,
    test_the_root_is_looked_at_without_being_made_and_made_on_request,
)}
