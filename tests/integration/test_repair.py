"""``garmexport repair`` fills a deleted file's records from the broker, exactly once.

A small topic (2 partitions, 4,000 records, a few bad ones) is exported and the exporter
stopped; then the largest data file and one quarantine file are deleted. ``verify`` must
name the gap; a dry run must print the plan, exit 1 and write nothing; ``repair --apply``
is killed right after its first publish (the exporter's own crash point) and run again;
then ``verify`` against the broker must find every record exactly once. Records produced
after the export (above the committed point) are then left to the exporter.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.parquet as pq

from tests.integration.harness import (
    PYTHON, ROOT, assert_exact, export_all_exactly_once, exporter_env, produce, topic_ends,
    verify,
)


def _repair(env: dict[str, str], *args: str, extra: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "garmexport", "repair", "--progress-s", "0", *args],
                          env={**env, **(extra or {})}, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def _files(root: Path) -> set[str]:
    """Every file under the root but the temp files."""
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not str(p.relative_to(root)).startswith("_tmp")}


def test_repair_fills_a_deleted_file_once_across_a_kill(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, 4_000, partitions=2, seed=33, days=2, bad_share=0.01)
    ends = topic_ends(broker.bootstrap, topic)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root))
    export_all_exactly_once(env, tmp_path, "export")

    data = [p for p in root.glob("[!_]*/day=*/*.parquet")]
    victim = max(data, key=lambda p: pq.read_metadata(p).num_rows)
    quarantined = sorted(root.glob("_quarantine/day=*/*.parquet"))
    assert quarantined, "no quarantine file: produce more bad records"
    gone = {victim: pq.read_metadata(victim).num_rows,
            quarantined[0]: pq.read_metadata(quarantined[0]).num_rows}
    for path in gone:
        path.unlink()
    dataset, day = victim.parts[-3], victim.parts[-2]

    code, report = verify(env)
    assert code == 1
    gaps = [g["what"] for r in report["partitions"].values() for g in r["gaps"]]
    assert any(f"{dataset}/{day}" in g for g in gaps), gaps
    assert sum(r["missing"] for r in report["partitions"].values()) == sum(gone.values())

    before = _files(root)
    dry = _repair(env)
    print(dry.stdout)
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert f"{dataset}/{day}: would add {gone[victim]} rows" in dry.stdout, dry.stdout
    assert "_quarantine/day=" in dry.stdout and "run with --apply" in dry.stdout, dry.stdout
    assert _files(root) == before, "a dry run wrote something"

    # two files at least (the victim's rows cut in halves): the kill leaves one of them
    small = {"GARMEXPORT_WRITER_MAX_FILE_ROWS": str(max(1, gone[victim] // 2))}
    killed = _repair(env, "--apply", extra={**small, "TEST_GARMEXPORT_CRASH_AFTER": "publish:1"})
    assert killed.returncode == 137, killed.stdout + killed.stderr
    assert len(_files(root) - before) >= 1  # the first file (and its intent, left)

    again = _repair(env, "--apply", extra=small)
    print(killed.stdout, again.stdout, sep="")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 not added" in again.stdout and "0 lost for good" in again.stdout, again.stdout
    assert_exact(env, ends)  # every record exactly once: no duplicate, none missing

    # records past the committed point (no exporter ran since) are the exporter's: left
    produce(broker.bootstrap, topic, 200, partitions=2, seed=34, days=2)
    later = _repair(env)
    assert later.returncode == 0, later.stdout + later.stderr
    assert "would add 0 rows" in later.stdout and "in flight (offsets 2" in later.stdout
    assert "; 0 in flight" not in later.stdout, later.stdout
