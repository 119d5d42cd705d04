"""The demo's working directory: only what the demo made is ever deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from garmexport.testbed.demo_workdir import MARKER, prepare
from garmexport.errors import ConfigError


def test_a_new_directory_is_created_with_the_marker(tmp_path: Path) -> None:
    work = tmp_path / "a" / "demo"
    prepare(work)
    assert [p.name for p in work.iterdir()] == [MARKER]


def test_an_empty_directory_of_the_user_is_taken_and_kept(tmp_path: Path) -> None:
    prepare(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [MARKER]


def test_a_directory_with_files_of_its_own_is_refused_and_left_untouched(tmp_path: Path) -> None:
    (tmp_path / "thesis.tex").write_text("years of work")
    (tmp_path / "data").mkdir()
    with pytest.raises(ConfigError, match="not made by the demo.*nothing was deleted"):
        prepare(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "thesis.tex"]
    assert (tmp_path / "thesis.tex").read_text() == "years of work"


def test_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        prepare(tmp_path / "f")
    assert (tmp_path / "f").read_text() == "x"


def test_a_directory_the_demo_made_is_emptied_for_the_next_run(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    prepare(work)
    (work / "output" / "day=2026-11-01").mkdir(parents=True)
    (work / "exporter.log").write_text("old run")
    (work / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep").write_text("k")
    prepare(work)
    assert [p.name for p in work.iterdir()] == [MARKER]
    assert (tmp_path / "outside" / "keep").read_text() == "k"  # a link is removed, not followed
