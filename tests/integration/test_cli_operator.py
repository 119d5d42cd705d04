"""The command line as an operator meets it, in real processes: foreseeable errors give an
exit code and one line that says what to do, never a traceback; a second signal exits with
a documented code; the demo deletes only what it made; verify shows progress and names the
files of each problem.

``python -m garmexport`` runs as a child process; "broker down" is a loopback port with no
listener (the bootstrap address of a broker that is not running).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from garmexport.cli import main as cli
from garmexport.tools.embedded_broker import free_port
from garmexport.tools.verify import expected_from_records
from tests.integration.harness import PYTHON, ROOT, Exporter, exporter_env, produce
from tests.integration.test_offsets_cli import records_of


def garmexport(env: dict[str, str], *args: str, timeout_s: float = 120) -> tuple[int, str, float]:
    """(exit code, stderr, seconds) of ``garmexport ARGS``."""
    started = time.monotonic()
    done = subprocess.run([PYTHON, "-m", "garmexport", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout_s)
    return done.returncode, done.stderr, time.monotonic() - started


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_misspelled_kafka_variable_is_refused_by_config_and_run_naming_the_close_one(
        tmp_path: Path) -> None:
    env = exporter_env(f"127.0.0.1:{free_port()}", "t", str(tmp_path / "out"),
                       KAFKA_BOOTSTRAP_SERVERSS="x", LOG_FORMAT="text")
    for command in ("config", "run"):
        code, err, _ = garmexport(env, command)
        assert code == 2, err
        assert "Traceback" not in err and len(lines(err)) == 1, err
        assert "GARMEXPORT_KAFKA_BOOTSTRAP_SERVERSS" in err, err
        assert "did you mean GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS?" in err, err


def test_offsets_and_verify_say_within_seconds_that_the_broker_is_unreachable(
        tmp_path: Path) -> None:
    env = exporter_env(f"127.0.0.1:{free_port()}", "t", str(tmp_path / "out"), LOG_FORMAT="text")
    for args in (["offsets"], ["offsets", "set", "--partition", "0", "--offset", "5"],
                 ["offsets", "set", "--partition", "0", "--timestamp", "0"], ["verify"]):
        code, err, seconds = garmexport(env, *args)
        assert code == 1, err
        assert "Traceback" not in err and len(lines(err)) == 1, err
        assert "broker unreachable" in err and "--no-broker" in err, err
        assert seconds < 15, (args, seconds)
    # What the message points to works without the broker.
    assert garmexport(env, "offsets", "--no-broker")[0] == 0
    assert garmexport(env, "verify", "--no-broker")[0] == 0


def test_a_negative_offset_or_partition_is_a_usage_error(tmp_path: Path) -> None:
    env = exporter_env(f"127.0.0.1:{free_port()}", "t", str(tmp_path / "out"))
    for args in (["--partition", "0", "--offset", "-5"], ["--partition", "-1", "--offset", "5"]):
        code, err, _ = garmexport(env, "offsets", "set", *args, "--dry-run", "--no-broker")
        assert code == 2, err
        assert "Traceback" not in err and "must be 0 or more" in lines(err)[-1], err


def test_demo_refuses_a_workdir_it_did_not_make_and_deletes_nothing(tmp_path: Path) -> None:
    work = tmp_path / "mine"
    work.mkdir()
    (work / "notes.txt").write_text("not the demo's")
    env = exporter_env(f"127.0.0.1:{free_port()}", "t", str(tmp_path / "out"))
    code, err, seconds = garmexport(env, "demo", "--workdir", str(work), "--events", "10",
                                    "--skip-compaction")
    assert code == 2, err
    assert "Traceback" not in err and len(lines(err)) == 1 and "not made by the demo" in err, err
    assert [p.name for p in work.iterdir()] == ["notes.txt"]
    assert (work / "notes.txt").read_text() == "not the demo's"


def documented_exit_codes() -> tuple[set[int], str]:
    """The codes ``garmexport --help`` lists, and the README's exit-code paragraph."""
    listed = {int(code) for code in re.findall(r"^\s+(\d+)\s", cli.EXIT_CODES, re.M)}
    readme = (ROOT / "README.md").read_text()
    return listed, readme[readme.index("Exit codes:"):readme.index("## Configuration")]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_while_run_stops_exits_with_a_documented_code(
        broker, tmp_path: Path, signum: int) -> None:
    topic = broker.new_topic(partitions=2)
    produce(broker.bootstrap, topic, 4000, partitions=2, seed=3)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"), WRITER_MAX_FILE_AGE_S=600)
    exporter = Exporter(env, tmp_path, f"twice-{signum}")
    try:
        exporter.wait_event("assigned", timeout_s=60)
        exporter.process.send_signal(signum)
        exporter.wait_event("stopping", timeout_s=30)  # the clean stop takes seconds
        exporter.process.send_signal(signum)
        code = exporter.process.wait(timeout=60)
    finally:
        exporter.close()
    assert code == 128 + signum, exporter.tail()
    listed, readme = documented_exit_codes()
    assert code in listed, cli.EXIT_CODES
    assert str(code) in readme, readme


def test_verify_shows_progress_and_names_the_files_of_a_duplicate_and_of_a_gap(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=1)
    produce(broker.bootstrap, topic, 3000, partitions=1, seed=11, bad_share=0.01)
    expected = expected_from_records(0, records_of(broker.bootstrap, topic)[0])
    by_dataset: dict[str, list[int]] = {}
    for offset, dataset in sorted(expected.items()):
        by_dataset.setdefault(dataset, []).append(offset)
    dataset = max(by_dataset, key=lambda d: len(by_dataset[d]))
    assert len(by_dataset[dataset]) >= 500, {d: len(o) for d, o in by_dataset.items()}
    root = tmp_path / "out"
    written: list[str] = []
    for name, offsets in sorted(by_dataset.items()):
        chunks = [offsets[i:i + 100] for i in range(0, len(offsets), 100)]
        for n, chunk in enumerate(chunks):
            if name == dataset and n == 2:
                continue  # lost: a gap between chunks 1 and 3
            copies = 2 if name == dataset and n == 4 else 1  # chunk 4 twice
            for copy in range(copies):
                rel = f"{name}/day=2026-11-01/{n:04d}-{copy}.parquet"
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                table = {"kafka_partition": [0] * len(chunk), "kafka_offset": chunk}
                if name == "_quarantine":
                    table["topic"] = [topic] * len(chunk)
                pq.write_table(pa.table(table), root / rel)
                written.append(rel)
    env = exporter_env(broker.bootstrap, topic, str(root), LOG_FORMAT="text")
    run = [PYTHON, "-m", "garmexport", "verify", "--progress-s", "0"]
    done = subprocess.run(run + ["--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    progress = [line for line in done.stderr.splitlines() if "reading the output:" in line]
    assert len(progress) == len(written), done.stderr
    rows = len(expected)  # 100 lost, 100 twice
    assert progress[-1].startswith(f"verify: reading the output: {len(written)}/{len(written)} "
                                   f"files, {rows} rows"), progress[-1]
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)["partitions"]["0"]
    chunk = by_dataset[dataset]
    day = f"{dataset}/day=2026-11-01"
    assert report["duplicate_files"] == [{
        "files": [f"{day}/0004-0.parquet", f"{day}/0004-1.parquet"],
        "first": chunk[400], "last": chunk[499], "count": 100}]
    assert report["gaps"] == [{
        "dataset": dataset, "first": chunk[200], "last": chunk[299], "count": 100,
        "before": f"{day}/0001-0.parquet", "after": f"{day}/0003-0.parquet"}]

    # In the JSON log format the progress lines are JSON log events too: every line on
    # stderr parses, and the report on stdout is the same.
    env["GARMEXPORT_LOG_FORMAT"] = "json"
    done = subprocess.run(run + ["--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    events = [json.loads(line) for line in lines(done.stderr)]  # raises on a line not JSON
    reading = [e["text"] for e in events if e["event"] == "progress"
               and e["logger"] == "garmexport.verify" and "reading the output:" in e["text"]]
    assert len(reading) == len(written), done.stderr
    assert reading[-1].startswith(f"reading the output: {len(written)}/{len(written)} files, "
                                  f"{rows} rows"), reading[-1]
    assert json.loads(done.stdout)["partitions"]["0"] == report
    text = subprocess.run(run, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert text.returncode == 1
    assert (f"gap in {dataset}: offsets {chunk[200]}..{chunk[299]} (100 missing) after "
            f"{day}/0001-0.parquet and before {day}/0003-0.parquet") in text.stdout, text.stdout
    assert (f"duplicate offsets {chunk[400]}..{chunk[499]} (100) held by: "
            f"{day}/0004-0.parquet, {day}/0004-1.parquet") in text.stdout, text.stdout
