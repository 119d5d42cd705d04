"""Freshness at a low rate: time from a record reaching Kafka to its row being visible.

``python tests/bench/bench_latency.py [--rate 100] [--duration 120] [--max-file-age-s S]``

``garmexport run`` (defaults: ``max_file_age_s`` 60) exports a 4-partition topic while
``garmexport produce --rate`` feeds it in a background process. The bench tails the topic
itself (assigned partitions, no group) and notes when each exported record arrives; it
polls the final day directories every 0.2 s, reads the partition and offset columns of each
new file, and takes the poll time as the moment its rows became visible. Latency per record =
visible - arrival (so the producer's own queueing is not counted). Reports p50, p99 and max;
target: max within ``max_file_age_s`` + 5 s. Exits 0 regardless.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import (ROOT, data_files, exporter_env, log_events,  # noqa: E402
                            start_exporter, start_with_topic)
from procstats import kill_tree, spawn  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: E402

from garmexport.wire.events import REGISTRY  # noqa: E402
from garmexport.wire.frames import DecodeFailure, read_head  # noqa: E402

TOPIC, PARTITIONS = "garmadon", 4


class Tail(threading.Thread):
    """Notes the wall time each exported record of the topic arrives at a plain consumer."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.arrived: dict[tuple[int, int], float] = {}
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "latency-tail",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                                  "fetch.queue.backoff.ms": 10})
        self.consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

    def run(self) -> None:
        while not self.stop.is_set():
            for msg in self.consumer.consume(1000, 0.05):
                if msg.error() is None:
                    head = read_head(msg.value())
                    if not isinstance(head, DecodeFailure) and REGISTRY[head[0]].output:
                        self.arrived[(msg.partition(), msg.offset())] = time.time()
        self.consumer.close()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="records per second")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of producing")
    parser.add_argument("--max-file-age-s", type=float, help="override (default: the exporter's, 60)")
    parser.add_argument("--json-out", default="bench-results/latency.json")
    args = parser.parse_args(argv)
    max_age = args.max_file_age_s if args.max_file_age_s is not None else 60.0
    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    broker = exporter = producer = tail = None
    try:
        broker = start_with_topic(work, TOPIC, PARTITIONS)
        out = work / "out"
        extra = {} if args.max_file_age_s is None else {
            "GARMEXPORT_WRITER_MAX_FILE_AGE_S": str(args.max_file_age_s)}
        env = exporter_env(broker.bootstrap, TOPIC, "latency", out, **extra)
        exporter = start_exporter(env, work / "exporter.log")
        deadline = time.monotonic() + 60
        while not log_events(work / "exporter.log", "assigned") and time.monotonic() < deadline:
            time.sleep(0.2)
        tail = Tail(broker.bootstrap)
        tail.start()
        producer = spawn([sys.executable, "-m", "garmexport", "produce", "--bootstrap",
                          broker.bootstrap, "--topic", TOPIC, "--partitions", str(PARTITIONS),
                          "--rate", str(args.rate), "--duration", str(args.duration),
                          "--days", "1", "--progress-s", "0"], str(work / "produce.log"),
                         env=env, cwd=str(ROOT))
        visible: dict[tuple[int, int], float] = {}
        seen: set[Path] = set()
        end = time.monotonic() + args.duration + max_age + 30  # generous: we report, not wait
        while time.monotonic() < end:
            now = time.time()
            for path in data_files(out):
                if path not in seen:
                    seen.add(path)
                    cols = pq.read_table(path, columns=["kafka_partition", "kafka_offset"])
                    for p, o in zip(cols.column(0).to_pylist(), cols.column(1).to_pylist()):
                        visible[(p, o)] = now
            if producer.poll() is not None and tail.arrived and set(tail.arrived) <= set(visible):
                break
            time.sleep(0.2)
        arrived = dict(tail.arrived)
        latencies = [visible[k] - t for k, t in arrived.items() if k in visible]
        missing = len(arrived) - len(latencies)
        result = {"rate": args.rate, "duration_s": args.duration, "max_file_age_s": max_age,
                  "records": len(arrived), "not_visible": missing, "files": len(seen)}
        if latencies:
            result |= {"p50_s": round(percentile(latencies, 0.5), 2),
                       "p99_s": round(percentile(latencies, 0.99), 2),
                       "max_s": round(max(latencies), 2)}
        held = bool(latencies) and missing == 0 and result["max_s"] <= max_age + 5
        result["held"] = held
        print(json.dumps(result))
        print(f"target: every record visible within max_file_age_s + 5 = {max_age + 5:.0f} s: "
              f"{'held' if held else 'NOT held'}")
        out_path = Path(args.json_out)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(result, indent=2))
    finally:
        if tail is not None:
            tail.stop.set()
            tail.join(timeout=10)
        for proc in (producer, exporter):
            if proc is not None:
                kill_tree(proc, grace_s=30.0)
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    main()
    raise SystemExit(0)
