"""CountedStorage: every call to the store is counted by kind and passed on unchanged."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from garmexport.errors import PublishConflict
from garmexport.storage.counted import CountedStorage
from garmexport.storage.local import LocalStorage


def test_each_call_is_counted_by_kind_and_answered_by_the_store(tmp_path: Path) -> None:
    counted: Counter[str] = Counter()
    store = CountedStorage(LocalStorage(str(tmp_path), "unit"), lambda op: counted.update([op]))
    store.put_exclusive("a/b.json", b"one")
    with pytest.raises(PublishConflict):
        store.put_exclusive("a/b.json", b"two")
    staged = store.stage(b"three")
    store.publish(staged, "a/c.json")
    store.discard(store.stage(b"four"))
    assert store.read("a/b.json") == b"one"
    assert store.exists("a/b.json") and not store.exists("a/d.json")
    assert [e.name for e in store.list("a")] == ["b.json", "c.json"]
    assert store.read_tail("a/b.json", 2) == (b"ne", 3)
    store.delete("a/b.json")
    assert counted == Counter(put=2, stage=2, publish=1, discard=1, read=1, exists=2,
                              list=1, read_tail=1, delete=1)
    assert store.uri == LocalStorage(str(tmp_path), "unit").uri


def test_the_temp_collection_counts_its_listings_and_removals(tmp_path: Path) -> None:
    counted: Counter[str] = Counter()
    store = CountedStorage(LocalStorage(str(tmp_path), "old"), lambda op: counted.update([op]))
    staged = store.stage(b"left behind")
    assert staged.size == len(b"left behind")
    counted.clear()
    assert store.gc_temp(0.0, 2e10) == 1  # everything is older than a time far ahead
    assert counted["list"] >= 2 and counted["delete"] >= 1


def test_an_intent_is_the_store_s_own_put_created_in_place_on_a_local_disk(
        tmp_path: Path) -> None:
    """The store's own put_exclusive runs (on a local disk an empty intent is created in
    place, with no temp file), not the base class's stage and publish."""
    counted: Counter[str] = Counter()
    inner = LocalStorage(str(tmp_path), "unit")
    staged_before = sorted(tmp_path.rglob("*"))
    CountedStorage(inner, lambda op: counted.update([op])).put_exclusive("p/i.intent", b"")
    assert counted == Counter(put=1)
    made = sorted(set(tmp_path.rglob("*")) - set(staged_before))
    assert [p.relative_to(tmp_path).as_posix() for p in made if p.is_file()] == ["p/i.intent"]
