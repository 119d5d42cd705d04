"""Compaction of a real exporter run, while the exporter keeps writing late events.

The exporter publishes a closed day as well over 1,000 small files (10 rows each); a
producer keeps sending late events of that day; compaction runs in the middle of it and
again once everything is caught up. It must fold only what the markers say is committed,
leave the files published meanwhile for the next run, keep every record exactly once
(verify), shrink the day to a few files, and show the same counts through Hive.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from garmexport.wire.events import by_output
from garmexport.wire.frames import encode
from garmexport.protocol.naming import MS_PER_DAY, day_name
from tests.integration.harness import (
    NOW_MS, PYTHON, ROOT, Exporter, assert_exact, exporter_env, produce, topic_ends,
    wait_caught_up,
)

PARTITIONS = 2
#: about 1,200 files of 10 rows in the closed day; with 30,000 events, and late events at
#: 400 a second, the second run had some 4,000 files to fold and took over 600 s on a
#: loaded machine
EVENTS = 24_000
#: late events per 0.5 s: some 4 files a second while the first run plans, writes and swaps
LATE_BATCH = 20
CLOSED_DAY = day_name(NOW_MS // MS_PER_DAY - 1)


def compact(env: dict[str, str], cwd: Path) -> str:
    """One ``garmexport compact --show-counts`` run (its own Spark, Derby under ``cwd``)."""
    done = subprocess.run([PYTHON, "-m", "garmexport", "compact", "--show-counts"], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def visible_files(root: Path, output: str, day: str) -> list[Path]:
    return [p for p in (root / output / f"day={day}").glob("*.parquet")
            if not p.name.startswith(("_", "."))]


def late_events(bootstrap: str, topic: str, stop: threading.Event, sent: list[int]) -> None:
    """Late fs events of the closed day, 40 a second, until ``stop``."""
    fs = by_output("fs")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        for _ in range(LATE_BATCH):
            ts = NOW_MS // MS_PER_DAY * MS_PER_DAY - 3_600_000 - i  # 23:00 of the closed day
            producer.produce(topic, encode(fs.marker, ts, b"", b""), partition=i % PARTITIONS,
                             timestamp=NOW_MS)
            i += 1
        producer.poll(0)
        time.sleep(0.5)
    producer.flush(30)
    sent.append(i)


def test_compaction_of_a_real_run_alongside_the_exporter_stays_exact(broker, tmp_path):
    topic = broker.new_topic(partitions=PARTITIONS)
    produce(broker.bootstrap, topic, EVENTS, partitions=PARTITIONS, days=2,
            mix={"FS_EVENT": 1.0}, late_share=0.05)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), WRITER_MAX_FILE_ROWS=10,
                       WRITER_IDLE_FLUSH_S=1, COMPACTION_LATENESS_S=0,
                       COMPACTION_RETIRED_GRACE_S=0,
                       COMPACTION_SPARK_MASTER="local[1]")
    exporter = Exporter(env, tmp_path, "exporter")
    stop, sent = threading.Event(), []
    late = threading.Thread(target=late_events, args=(broker.bootstrap, topic, stop, sent))
    try:
        exporter.wait_event("assigned", timeout_s=60)
        ends = topic_ends(broker.bootstrap, topic)
        wait_caught_up(str(root), topic, ends, timeout_s=240)
        small = len(visible_files(root, "fs", CLOSED_DAY))
        assert small >= 1000, f"the exporter should have left >= 1000 small files, got {small}"

        late.start()
        time.sleep(3)
        first = compact(env, tmp_path)  # the exporter publishes late files meanwhile
        print(first.splitlines()[-1])
        time.sleep(2)
        stop.set()
        late.join(timeout=60)
        assert sent and sent[0] > 0

        ends = topic_ends(broker.bootstrap, topic)
        wait_caught_up(str(root), topic, ends, timeout_s=240)
        second = compact(env, tmp_path)  # folds the late files the first run left alone
        assert exporter.terminate() == 0, exporter.tail()
    finally:
        stop.set()
        exporter.close()

    report = assert_exact(env, ends)
    files = visible_files(root, "fs", CLOSED_DAY)
    assert 1 <= len(files) <= 3, f"{len(files)} files left in fs/day={CLOSED_DAY}"
    held = sum(r["rows"] - r["quarantined"] for r in report["partitions"].values())
    # the exporter's environment logs JSON, so compact prints its counts as JSON lines too
    rows = [json.loads(line) for line in second.splitlines() if line.startswith("{")]
    counts = {(r["table"].rsplit(".", 1)[-1], r["day"]): r["rows"] for r in rows
              if r.get("event") == "table_rows"}
    assert sum(n for (t, _), n in counts.items() if t == "fs") == held, (counts, held)
    print(f"fs/day={CLOSED_DAY}: {small} small files -> {len(files)}; "
          f"{sent[0]} late events during compaction; Hive rows {held}")
