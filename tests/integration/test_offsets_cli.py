"""``garmexport offsets`` against the real broker and a real exporter process.

``offsets set`` writes markers (by offset, and by timestamp through the record search that
tansu needs: it answers every timestamp lookup with offset 0), ``garmexport run`` then
starts exactly there (its ``assigned`` log event) and the output holds exactly the records
from the asked offsets on; ``offsets`` shows the committed position at the end, lag 0.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

from garmexport.kafka.topic_scan import scan
from garmexport.storage.open import open_storage
from garmexport.verify.count import compare, expected_from_records, read_output
from tests.integration.harness import (
    PYTHON, ROOT, Exporter, exporter_env, produce, topic_ends, wait_caught_up,
)

RECORDS = 12_000
PARTITIONS = 4


def offsets(env: Mapping[str, str], *args: str, expect: int = 0) -> dict:
    """Run ``garmexport offsets ARGS --json``; the exit code must be ``expect``."""
    done = subprocess.run([PYTHON, "-m", "garmexport", "offsets", *args, "--json"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == expect, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def records_of(bootstrap: str, topic: str) -> dict[int, list]:
    """Every record (confluent-kafka Message) of ``topic`` per partition, in offset order."""
    out: dict[int, list] = {}
    scan({"bootstrap.servers": bootstrap}, topic,
         lambda p, recs: out.setdefault(p, []).extend(recs), timeout_s=120)
    return out


def test_set_offsets_and_timestamps_then_run_exports_exactly_from_there(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    produce(broker.bootstrap, topic, RECORDS, partitions=PARTITIONS, seed=5, days=2, bad_share=0.01)
    ends = topic_ends(broker.bootstrap, topic)
    root = str(tmp_path / "out")
    Path(root).mkdir()  # a new deployment's root: offsets reads and writes it, never makes it
    env = exporter_env(broker.bootstrap, topic, root, WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1)

    before = offsets(env)
    assert [(r["partition"], r["seek"], r["end"], r["lag"]) for r in before["partitions"]] == \
        [(p, None, ends[p], ends[p]) for p in range(PARTITIONS)]

    # By offset: partitions 0 and 1.
    by_offset = {0: 1000, 1: 7}
    done = offsets(env, "set", "--partition", "0", "--offset", "1000",
                   "--partition", "1", "--offset", "7")
    assert [(r["partition"], r["old_seek"], r["new_seek"], r["skipped"]) for r in done["partitions"]] \
        == [(0, None, 1000, 1000), (1, None, 7, 7)]

    # By timestamp: partitions 2 and 3, one time between two records of partition 2.
    records = records_of(broker.bootstrap, topic)
    stamps = {p: [(m.offset(), m.timestamp()[1]) for m in recs] for p, recs in records.items()}
    wanted = stamps[2][1234][1] - 1
    assert stamps[2][1233][1] < wanted
    expected_at = {p: next(o for o, ts in stamps[p] if ts >= wanted) for p in (2, 3)}
    done = offsets(env, "set", "--partition", "2", "--partition", "3", "--timestamp", str(wanted))
    for row in done["partitions"]:
        assert row["new_seek"] == expected_at[row["partition"]], row
        assert row["search"]["broker_answer"] == 0 and not row["search"]["broker_answer_trusted"]
    assert expected_at[2] == 1234
    asked = {**by_offset, **expected_at}

    listed = offsets(env)  # the markers alone already give the new positions
    assert {r["partition"]: r["seek"] for r in listed["partitions"]} == asked

    exporter = Exporter(env, tmp_path, "after-set")
    try:
        seeks = exporter.wait_event("assigned", timeout_s=60)["seeks"]
        assert {int(p): s for p, s in seeks.items()} == asked

        def alive() -> None:
            assert exporter.alive(), exporter.tail()

        wait_caught_up(root, topic, ends, timeout_s=180, alive=alive)
        assert exporter.terminate() == 0, exporter.tail()
    finally:
        exporter.close()

    held, files = read_output(open_storage(root, "probe"), topic)
    expected = {p: {o: ds for o, ds in expected_from_records(p, recs).items() if o >= asked[p]}
                for p, recs in records.items()}
    assert {o for p, o in held if o < asked[p]} == set(), "records before the asked offsets"
    report = compare(held, files, expected)  # exactly once, in its dataset or quarantined
    assert report.ok, json.dumps(report.to_dict())[-3000:]
    assert sum(r.rows for r in report.partitions.values()) == \
        sum(len(v) for v in expected.values()) > RECORDS * 0.5

    after = offsets(env)
    assert [(r["partition"], r["seek"], r["lag"]) for r in after["partitions"]] == \
        [(p, ends[p], 0) for p in range(PARTITIONS)]
    assert after["total_lag"] == 0
    table = subprocess.run([PYTHON, "-m", "garmexport", "offsets"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and f"local+{topic}" in table.stdout, table.stderr
    assert [line.split()[:4] for line in table.stdout.splitlines()[2:] if line[:9].strip()] == \
        [[str(p), str(ends[p]), str(ends[p]), "0"] for p in range(PARTITIONS)]

    # Going back over what is now committed is refused; forced, it replaces the markers.
    refused = offsets(env, "set", "--partition", "0", "--offset", "0", expect=1)
    assert refused["refused"] and refused["partitions"][0]["refused"]
    assert offsets(env)["partitions"][0]["seek"] == ends[0]
    dry = offsets(env, "set", "--partition", "0", "--offset", "0", "--force", "--dry-run")
    assert dry["partitions"][0]["written"] == []
    forced = offsets(env, "set", "--partition", "0", "--offset", "0", "--force")
    assert len(forced["partitions"][0]["written"]) >= 2  # the new marker, then deletions
    now = offsets(env, "--no-broker")["partitions"]
    assert [(r["partition"], r["seek"], r["markers"], r["intents"], r["end"]) for r in now][0] == \
        (0, 0, 1, 0, None)
    assert [r["seek"] for r in now[1:]] == [ends[p] for p in range(1, PARTITIONS)]
