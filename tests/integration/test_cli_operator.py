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
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from garmexport.cli import main as cli
from garmexport.protocol.naming import FileName
from garmexport.testbed.embedded_broker import free_port
from garmexport.verify.count import expected_from_records
from tests.integration.harness import (
    PYTHON, ROOT, Exporter, exporter_env, produce, topic_ends, verify, wait_caught_up,
)
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
    (tmp_path / "out").mkdir()  # the output is there: the broker is what is missing
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
        "before": f"{day}/0001-0.parquet", "after": f"{day}/0003-0.parquet", "day": None,
        "what": f"offsets {chunk[200]}..{chunk[299]} (100 missing) after {day}/0001-0.parquet "
                f"and before {day}/0003-0.parquet"}]

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


def test_verify_names_a_file_that_is_not_parquet_and_goes_on_checking_the_rest(
        tmp_path: Path) -> None:
    """A truncated copy, a text file and a JVM-named file of garbage among real files: each
    is one finding in words with pyarrow's reason, the duplicate between the two real files
    is still found, and the exit code is the one for findings, with no traceback."""
    root = tmp_path / "out"
    day = root / "fs" / "day=2026-11-01"
    day.mkdir(parents=True)
    rows = pa.table({"kafka_partition": [0] * 10, "kafka_offset": list(range(10))})
    pq.write_table(rows, day / "a.parquet")
    pq.write_table(rows, day / "b.parquet")  # every row of a again: a duplicate finding
    whole = (day / "a.parquet").read_bytes()
    (day / "cut.parquet").write_bytes(whole[:len(whole) // 2])
    (day / "notes.parquet").write_text("left here by hand, not Parquet\n")
    (day / "0.index=7").write_bytes(b"\x00" * 64)  # named like a JVM exporter's file
    bad = [f"fs/day=2026-11-01/{n}" for n in ("0.index=7", "cut.parquet", "notes.parquet")]
    env = exporter_env(f"127.0.0.1:{free_port()}", "t", str(root), LOG_FORMAT="text")
    run = [PYTHON, "-m", "garmexport", "verify", "--no-broker"]

    text = subprocess.run(run, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert text.returncode == 1, text.stdout + text.stderr  # README: a finding exits 1
    assert "Traceback" not in text.stderr and "Error" not in text.stderr, text.stderr
    said = [line for line in text.stdout.splitlines() if line.startswith("unreadable file ")]
    assert len(said) == 3, text.stdout
    for path, line in zip(bad, said):
        assert line.startswith(f"unreadable file {path}: not a Parquet file: "), line
        assert "magic bytes" in line, line  # pyarrow's own reason
    assert ("duplicate offsets 0..9 (10) held by: fs/day=2026-11-01/a.parquet, "
            "fs/day=2026-11-01/b.parquet") in text.stdout, text.stdout
    assert text.stdout.rstrip().endswith("verify: FAILED"), text.stdout
    # what needs the broker was not checked, and says so rather than 0 (issue 40)
    [row] = [line.split() for line in text.stdout.splitlines() if line.split()[:1] == ["0"]]
    # (partition rows quarantined broker end duplicates missing in-flight misplaced unexpected)
    assert row == ["0", "20", "0", "-", "-", "10", "-", "-", "-", "-"], text.stdout

    done = subprocess.run(run + ["--json"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert not report["ok"] and report["unreadable_count"] == 3, report
    assert [u["path"] for u in report["unreadable_files"]] == bad, report
    assert all(u["what"].startswith(f"{u['path']}: not a Parquet file: ")
               for u in report["unreadable_files"]), report
    assert report["partitions"]["0"]["rows"] == 20, report  # the two real files, read
    assert report["partitions"]["0"]["duplicates"] == 10, report
    assert not report["compared_with_broker"], report
    unchecked = {k: report["partitions"]["0"][k]
                 for k in ("missing", "misplaced", "unexpected", "gap_count", "gaps")}
    assert unchecked == dict.fromkeys(unchecked), report


def test_the_demo_says_how_much_of_the_lag_is_unread_and_how_much_unpublished(
        tmp_path: Path) -> None:
    """Once every record is read the lag stays until the files holding them are published
    (writer.max_file_age_s): the progress line says so instead of a bare 'lag 5000'."""
    env = exporter_env(f"127.0.0.1:{free_port()}", "t", str(tmp_path / "out"))
    done = subprocess.run([PYTHON, "-m", "garmexport", "demo", "--workdir",
                           str(tmp_path / "demo"), "--events", "5000", "--partitions", "2",
                           "--days", "1", "--skip-compaction"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = re.compile(r"^   read +(\d+) / 5000, lag (\d+): (\d+) to read, (\d+) read and "
                      r"waiting in files not yet published \(writer\.max_file_age_s\)$")
    shown = [tuple(map(int, m.groups())) for m in map(line.match, done.stdout.splitlines())
             if m]
    assert shown, done.stdout
    for read, lag, unread, waiting in shown:
        assert unread == 5000 - read and unread + waiting == lag, shown
    assert shown[-1] == (5000, 0, 0, 0), shown
    assert not [s for s in done.stdout.splitlines() if s.startswith("   consumed")], done.stdout


def test_verify_says_in_words_what_a_lost_or_renamed_file_of_a_real_export_did(
        broker, tmp_path: Path) -> None:
    """A real export over two days (a fifth of the events late): the files of one dataset
    but different days interleave in offsets. A lost file amid the rows of another day's
    file is one finding bordered by the files of its own day, not one gap per offset
    'after X and before X'; a file renamed to another first offset is flagged as
    disagreeing with its footer."""
    topic = broker.new_topic(partitions=1)
    produce(broker.bootstrap, topic, 3000, partitions=1, seed=21, days=2, late_share=0.2)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root))
    exporter = Exporter(env, tmp_path, "two-days")
    try:
        wait_caught_up(str(root), topic, topic_ends(broker.bootstrap, topic), timeout_s=120,
                       alive=exporter.check_alive)
        assert exporter.terminate() == 0, exporter.tail()
    finally:
        exporter.close()
    code, report = verify(env)
    assert code == 0 and report["ok"], report  # a real export agrees with itself

    def offsets_of(path: Path) -> list[int]:
        return pq.read_table(path, columns=["kafka_offset"]).column(0).to_pylist()

    # a file of one day whose offsets lie within the range of a file of another day
    files = sorted(p for p in root.glob("*/day=*/*.parquet") if not p.parts[-3].startswith("_"))
    spans = {p: (min(offsets_of(p)), max(offsets_of(p)), len(offsets_of(p))) for p in files}
    lost, amid = next((a, b) for a in files for b in files
                      if a.parts[-3] == b.parts[-3] and a.parent != b.parent
                      and spans[b][0] < spans[a][0] and spans[a][1] < spans[b][1]
                      and spans[a][2] >= 3)
    lost.unlink()
    code, report = verify(env)
    assert code == 1
    # one finding, bordered by the files of the lost one's own day directory
    [gap] = report["partitions"]["0"]["gaps"]
    rel = lost.relative_to(root)
    assert (gap["dataset"], gap["day"], gap["count"]) == (
        rel.parts[0], rel.parts[1].removeprefix("day="), spans[lost][2]), gap
    neighbours = sorted(str(p.relative_to(root)) for p in lost.parent.glob("*.parquet"))
    assert {gap["before"], gap["after"]} - {None} <= set(neighbours), gap
    assert not (gap["before"] and gap["before"] == gap["after"]), gap  # not "X and X"
    text = subprocess.run([PYTHON, "-m", "garmexport", "verify"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert f"gap in {rel.parts[0]}: {gap['what']}" in text.stdout, text.stdout
    assert gap["what"].startswith(f"offsets {gap['first']}..{gap['last']} "
                                  f"({gap['count']} missing)"), gap

    # a file renamed to another first offset: its name and its footer disagree
    name = FileName.parse(amid.name)
    assert name is not None
    renamed = amid.with_name(replace(name, first_offset=name.first_offset + 1).format())
    amid.rename(renamed)
    code, report = verify(env)
    assert code == 1
    [disagreeing] = report["partitions"]["0"]["disagreeing_files"]
    assert disagreeing["path"] == str(renamed.relative_to(root)), disagreeing
    assert (f"the name says first offset {name.first_offset + 1}, the footer "
            f"{name.first_offset}") in disagreeing["problems"], disagreeing
