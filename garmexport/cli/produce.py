"""``garmexport produce``: write the generator's records to a Kafka topic, and say what.

The producer batches hard (linger, a large queue, no compression) because it feeds
benchmarks of the exporter and must not be the bottleneck. Records go to explicit partitions
with the generator's Kafka timestamps, so two runs with the same arguments against empty
topics put the same bytes at the same (partition, offset).

The report (text, or ``--json`` on stdout) counts records by event type and by malformed
kind exactly as produced, for tests to compare with what the exporter wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from garmexport.observe import logs
from garmexport.cli.arg_types import epoch_ms, non_negative_float, positive_float
from garmexport.settings.config import Config
from garmexport.errors import BrokerError
from garmexport.tools.generator import PARTITIONERS, Spec, Tally, generate, parse_mix
from garmexport.kafka.client_callbacks import client_log_settings

PRODUCER_SETTINGS: Mapping[str, object] = {
    "linger.ms": 20,
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}
# Keys of [kafka] that also matter to a producer (where and how to connect).
_CLIENT_PREFIXES = ("bootstrap.", "security.", "sasl.", "ssl.", "client.", "socket.")
_FLUSH_TIMEOUT_S = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--count", type=int, metavar="N",
                      help="records to produce (default 10000)")
    size.add_argument("--rate", type=float, metavar="N",
                      help="records per second, for --duration seconds")
    parser.add_argument("--duration", type=float, default=10.0, metavar="S",
                        help="with --rate: seconds to produce for (default 10)")
    parser.add_argument("--bootstrap", metavar="HOST:PORT,...",
                        help="bootstrap servers (default: kafka bootstrap.servers)")
    parser.add_argument("--topic", help="topic (default: source.topic); created if missing")
    parser.add_argument("--partitions", type=int, default=4, metavar="N",
                        help="partitions to spread over (default 4)")
    parser.add_argument("--seed", type=int, default=1,
                        help="random seed: same seed, same records (default 1)")
    parser.add_argument("--days", type=positive_float, default=3.0, metavar="N",
                        help="event times span this many days; fractions too (0.5: 12 hours; "
                             "default 3)")
    parser.add_argument("--now", type=epoch_ms, help="end of the time window: epoch ms or "
                        "ISO 8601 (default: the current time)")
    parser.add_argument("--late-share", type=float, default=0.05, metavar="SHARE",
                        help="share of events dated on an earlier day than the stream "
                             "(default 0.05)")
    parser.add_argument("--bad-share", type=float, default=0.0, metavar="SHARE",
                        help="share of malformed records, every kind evenly (default 0)")
    parser.add_argument("--mix", type=parse_mix, default="default",
                        help='type weights, e.g. "fs=10,gc=2,path=1", or a whole mix: '
                             '"default" (the default) or "uniform"')
    parser.add_argument("--partitioner", choices=PARTITIONERS, default="round_robin",
                        help="round_robin, or application: one partition per application")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--progress-s", type=non_negative_float, default=5.0, metavar="S",
                        help="seconds between progress lines on stderr (default 5; 0: none)")


def client_settings(config: Config, bootstrap: str | None) -> dict[str, object]:
    """Producer settings: the connection keys of ``[kafka]`` plus the batching defaults."""
    settings = {k: v for k, v in config.kafka.items() if k.startswith(_CLIENT_PREFIXES)}
    if bootstrap:
        settings["bootstrap.servers"] = bootstrap
    return {**settings, **PRODUCER_SETTINGS}


def ensure_topic(settings: Mapping[str, object], topic: str, partitions: int) -> int:
    """Create ``topic`` with ``partitions`` unless it exists with at least that many;
    return the partitions it has.

    The topic is looked up in the list of all topics, never by name: a metadata request
    that names a missing topic makes a broker with ``auto.create.topics.enable`` create it
    with its default partition count (tansu: 4), which would win over ``partitions``.
    Raises BrokerError if the broker cannot be reached or the topic has fewer partitions.
    """
    admin = AdminClient({**{k: v for k, v in settings.items() if k not in PRODUCER_SETTINGS},
                         **client_log_settings()})
    try:
        existing = admin.list_topics(timeout=10).topics.get(topic)
        if existing is None or existing.error is not None:
            future = admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic]
            try:
                future.result(timeout=15)
            except KafkaException as e:
                if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
            existing = admin.list_topics(timeout=10).topics.get(topic)
    except KafkaException as e:
        raise BrokerError(f"cannot create or describe topic {topic}: {e}") from e
    finally:
        admin.poll(0)  # serves its log lines (why it failed) to the logger
    have = len(existing.partitions) if existing else 0
    if have < partitions:
        raise BrokerError(f"topic {topic} has {have} partitions, {partitions} were asked for")
    return have


def produce(settings: Mapping[str, object], topic: str, spec: Spec, count: int,
            rate: float | None = None,
            progress: Callable[[int, float], None] | None = None,
            progress_s: float = 5.0) -> dict[str, object]:
    """Produce ``count`` generated records; return the report (see the module docstring).

    ``rate`` (records/s) paces the sends; ``progress(done, seconds)`` is called every
    ``progress_s``. Raises BrokerError if records are still undelivered after 120 s of
    flushing; records the broker refused are counted in ``failed``.
    """
    failures: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer({**settings, "on_delivery": on_delivery,
                         "delivery.report.only.error": True, **client_log_settings()})
    tally, value_bytes = Tally(), 0
    start = time.monotonic()
    next_report = start + progress_s
    for i, record in enumerate(generate(spec, count)):
        if rate and i % 256 == 0 and (ahead := start + i / rate - time.monotonic()) > 0:
            time.sleep(ahead)
        while True:
            try:
                producer.produce(topic, value=record.value, key=record.key,
                                 partition=record.partition, timestamp=record.timestamp_ms)
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.05)
        tally.add(record)
        value_bytes += len(record.value or b"")
        if i % 4096 == 0:
            producer.poll(0)
            if progress and progress_s > 0 and time.monotonic() >= next_report:
                progress(i, time.monotonic() - start)
                next_report = time.monotonic() + progress_s
    if producer.flush(_FLUSH_TIMEOUT_S) > 0:
        raise BrokerError(f"records to {topic} still undelivered after {_FLUSH_TIMEOUT_S} s")
    seconds = time.monotonic() - start
    return {"topic": topic, **tally.as_dict(), "failed": len(failures),
            "first_failure": failures[0] if failures else None, "value_bytes": value_bytes,
            "seconds": round(seconds, 3),
            "records_per_s": round(tally.total / seconds) if seconds > 0 else None}


def main(args: argparse.Namespace, config: Config) -> int:
    if args.rate is not None:
        count = int(args.rate * args.duration)
    else:
        count = 10_000 if args.count is None else args.count
    try:
        if count < 0 or (args.rate is not None and args.rate <= 0):
            raise ValueError("--count must be >= 0 and --rate > 0")
        spec = Spec(now_ms=args.now if args.now is not None else int(time.time() * 1000),
                    seed=args.seed, partitions=args.partitions, days=args.days,
                    late_share=args.late_share, bad_share=args.bad_share, mix=args.mix,
                    partitioner=args.partitioner)
    except ValueError as e:
        print(f"garmexport produce: {e}", file=sys.stderr)
        return 2
    topic = args.topic or config.source.topic
    settings = client_settings(config, args.bootstrap)
    ensure_topic(settings, topic, args.partitions)

    def progress(done: int, seconds: float) -> None:
        logs.progress("produce", f"produced {done}/{count} in {seconds:.1f} s")

    report = produce(settings, topic, spec, count, rate=args.rate, progress=progress,
                     progress_s=args.progress_s)
    print(json.dumps(report, indent=2) if args.json else _text(report))
    if report["failed"]:
        print(f"garmexport produce: {report['failed']} records were not delivered: "
              f"{report['first_failure']}", file=sys.stderr)
        return 1
    return 0


def _text(report: Mapping[str, object]) -> str:
    lines = [f"produced {report['total']} records ({report['value_bytes']} value bytes) to "
             f"{report['topic']} in {report['seconds']} s: {report['records_per_s']} records/s"]
    for group in ("types", "bad", "partitions"):
        counts = report[group]
        assert isinstance(counts, dict)
        lines += [f"  {group:<10} {name:<38} {n:>10}" for name, n in counts.items()]
    return "\n".join(lines)
