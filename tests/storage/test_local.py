"""Local backend details: the rename fallback where hard links are refused."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from garmexport.errors import PublishConflict, StorageError
from garmexport.storage import local
from garmexport.storage.local import LocalStorage

PATH = "fs/day=2026-11-01/local+t+00000+00000000000000000042.parquet"


def refuse_links(monkeypatch: pytest.MonkeyPatch, code: int = errno.EPERM) -> None:
    def no_link(src: str, dst: str) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(local.os, "link", no_link)


def test_without_hard_links_publish_renames_without_replacing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_links(monkeypatch)
    storage = LocalStorage(tmp_path, "inst-a")
    storage.put_exclusive(PATH, b"first")
    staged = storage.stage(b"second")
    with pytest.raises(PublishConflict):
        storage.publish(staged, PATH)
    assert storage.read(PATH) == b"first"
    assert storage.list("_tmp/inst-a")  # the loser's staged file is still there to discard


def test_without_links_or_noreplace_rename_publish_refuses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_links(monkeypatch, errno.EXDEV)

    def no_renameat2(src: str, dst: str) -> None:
        raise OSError(errno.EINVAL, "not supported")

    monkeypatch.setattr(local, "rename_noreplace", no_renameat2)
    storage = LocalStorage(tmp_path, "inst-a")
    with pytest.raises(StorageError):
        storage.put_exclusive(PATH, b"x")
    assert not storage.exists(PATH)


def test_rename_noreplace_refuses_an_existing_target(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "b").write_bytes(b"b")
    with pytest.raises(FileExistsError):
        local.rename_noreplace(str(tmp_path / "a"), str(tmp_path / "b"))
    local.rename_noreplace(str(tmp_path / "a"), str(tmp_path / "c"))
    assert (tmp_path / "c").read_bytes() == b"a" and not (tmp_path / "a").exists()


def test_publish_leaves_no_temp_name_behind(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path, "inst-a")
    storage.put_exclusive(PATH, b"x")
    assert storage.list("_tmp/inst-a") == []
    assert os.stat(tmp_path / PATH).st_nlink == 1
    assert storage.uri == tmp_path.as_uri()


@pytest.mark.parametrize("links", [True, False])
def test_a_repeated_publish_of_the_same_staged_file_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool) -> None:
    """As after an fsync error past the link: the retry finds its own inode, no conflict."""
    if not links:
        refuse_links(monkeypatch)
    storage = LocalStorage(tmp_path, "inst-a")
    staged = storage.stage(b"mine")
    storage.publish(staged, PATH)
    storage.publish(staged, PATH)
    assert storage.read(PATH) == b"mine"
    other = storage.stage(b"other")
    with pytest.raises(PublishConflict):
        storage.publish(other, PATH)
