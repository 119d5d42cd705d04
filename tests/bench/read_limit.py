"""The read limit: a confluent-kafka consume loop that does nothing with the records.

``python tests/bench/read_limit.py --bootstrap H:P --topic T --group G --events N`` reads
the topic from the start with its own consumer group until it has seen ``N`` records, then
prints one JSON line: ``consumed``, ``first_record_wall_s`` (time.time()
when the first record arrived, i.e. after the group join), ``done_wall_s``,
``start_wall_s`` (after imports), and the process's CPU seconds (all threads) at the first
record and at done, ``first_record_cpu_s`` and ``done_cpu_s``. The only setting beyond the defaults is the one garmexport
also sets (``fetch.queue.backoff.ms=10``), so the loop is the ceiling garmexport's reader
could reach through librdkafka. Exits 1 if ``--timeout-s`` passes before ``N`` records.
"""

from __future__ import annotations

import argparse
import json
import time

from baseline_consumer import baseline_consumer_settings  # tests/bench, the script's directory
from confluent_kafka import Consumer


def main(argv: list[str] | None = None) -> int:
    start = time.time()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--batch", type=int, default=10_000, help="records per consume() call")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args(argv)
    consumer = Consumer(baseline_consumer_settings(args.bootstrap, args.group))
    consumer.subscribe([args.topic])
    consumed, first, first_cpu = 0, None, None
    deadline = time.monotonic() + args.timeout_s
    try:
        while consumed < args.events and time.monotonic() < deadline:
            for msg in consumer.consume(args.batch, 0.5):
                if msg.error() is not None:
                    continue
                if first is None:
                    first, first_cpu = time.time(), time.process_time()
                consumed += 1
    finally:
        done, done_cpu = time.time(), time.process_time()
        consumer.close()
    print(json.dumps({"consumed": consumed, "start_wall_s": start,
                      "first_record_wall_s": first, "done_wall_s": done,
                      "first_record_cpu_s": first_cpu, "done_cpu_s": done_cpu}), flush=True)
    return 0 if consumed >= args.events else 1


if __name__ == "__main__":
    raise SystemExit(main())
