"""``log.level = "DEBUG"`` on a real exporter: useful and bounded.

Before, the actor library logged every actor message in full at DEBUG (231 MB in 45 s,
lines of millions of characters) while garmexport added almost nothing of its own. Now
the actor library stays at WARNING unless ``log.actor_level`` asks, DEBUG fields are cut
short, and garmexport's own DEBUG events tell what it decided: what each assigned
partition recovered, when a burst ended and its files were flushed, each publish and its
time.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.harness import Exporter, exporter_env, produce, topic_ends, wait_caught_up

PARTITIONS = 2
RECORDS = 6_000
MAX_LINE_CHARS = 2_000


def test_debug_logs_garmexports_decisions_in_short_lines(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    produce(broker.bootstrap, topic, RECORDS, partitions=PARTITIONS, seed=6, days=2)
    root = str(tmp_path / "out")
    env = exporter_env(broker.bootstrap, topic, root, LOG_LEVEL="debug")  # any case
    run = Exporter(env, tmp_path, "debug")
    try:
        wait_caught_up(root, topic, topic_ends(broker.bootstrap, topic), timeout_s=120,
                       alive=run.check_alive)
        assert run.terminate() == 0, run.tail()
        lines = run.log_path.read_bytes().splitlines()
        size = sum(len(line) + 1 for line in lines)
        longest = max(len(line) for line in lines)
        docs = [json.loads(line) for line in lines]
        events = [d["event"] for d in docs]
        print(f"{len(lines)} lines, {size} bytes, longest {longest}; "
              f"{len([d for d in docs if d['level'] == 'DEBUG'])} at DEBUG")
        assert longest <= MAX_LINE_CHARS, max(lines, key=len)[:500]
        assert not [d for d in docs if d["logger"].startswith("Thespian")], "actor library at DEBUG"
        recovered = [d for d in docs if d["event"] == "partition_recovered"]
        assert sorted(d["partition"] for d in recovered) == list(range(PARTITIONS))
        assert all(d["level"] == "DEBUG" for d in recovered)
        published = [d for d in docs if d["event"] == "file_published"]
        assert published and all(d["seconds"] >= 0 and d["rows"] > 0 for d in published)
        assert {d["kind"] for d in published} >= {"data"}
        assert "flush_burst_end" in events, sorted(set(events))
        assert size < 200 * len(published) + 100_000, f"{size} bytes of log"
    except BaseException:
        print(run.tail(30))
        raise
    finally:
        run.close()
