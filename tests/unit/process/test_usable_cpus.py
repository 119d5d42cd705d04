"""The CPUs a process may use: affinity capped by the cgroup quota, v2 then v1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from garmexport.process.usable_cpus import cgroup_cpus, parse_cpu_max, quota_cpus, usable_cpus


@pytest.mark.parametrize("text, cpus", [
    ("200000 100000\n", 2), ("150000 100000", 2), ("50000 100000", 1), ("max 100000\n", None),
    ("", None), ("abc 100000", None), ("400000 100000 7", None), ("0 100000", None),
])
def test_cpu_max_lines(text: str, cpus: int | None) -> None:
    assert parse_cpu_max(text) == cpus


def test_no_quota_is_none() -> None:
    assert quota_cpus(-1, 100000) is None and quota_cpus(300000, 0) is None


def test_v2_file_first_then_v1_files(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "cpu.max", tmp_path / "v1"
    v1.mkdir()
    (v1 / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpus(v2, v1) == 3  # no v2 file: v1
    v2.write_text("100000 100000\n")
    assert cgroup_cpus(v2, v1) == 1
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpus(tmp_path / "absent", v1) is None
    assert cgroup_cpus(tmp_path / "absent", tmp_path / "absent") is None


def test_usable_cpus_is_within_the_affinity() -> None:
    assert 1 <= usable_cpus() <= len(os.sched_getaffinity(0))
