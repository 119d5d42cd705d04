"""``garmexport produce``: write the generator's records to a Kafka topic, and say what.

The records go through :mod:`garmexport.kafka.producer` (batched hard, explicit
partitions) with the generator's Kafka timestamps, so two runs with the same arguments
against empty topics put the same bytes at the same (partition, offset).

The report (text, or ``--json`` on stdout) counts records by event type and by malformed
kind exactly as produced, for tests to compare with what the exporter wrote.

Ctrl-C (SIGINT) stops producing: the records still queued in the client are dropped, the
ones in flight are waited for (up to ``kafka.producer._IN_FLIGHT_WAIT_S``; a second Ctrl-C stops the
wait), and the report says what reached the topic, per partition, and how long it took,
before the exit status 130 (``interrupted``, ``delivered``, ``delivered_partitions``;
``total``, ``types``, ``bad`` and ``partitions`` count what was handed to the client).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from garmexport.observe import logs
from garmexport.cli.arg_types import epoch_ms, non_negative_float, positive_float
from garmexport.settings.config import Config
from garmexport.testbed.generator import PARTITIONERS, Spec, Tally, generate, parse_mix
from garmexport.kafka.producer import PRODUCER_SETTINGS, send
from garmexport.kafka.topics import connection_settings, ensure_topic

#: the exit status of a run stopped by Ctrl-C (cli.main's for KeyboardInterrupt)
INTERRUPTED = 130


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
    settings = connection_settings(config.kafka)
    if bootstrap:
        settings["bootstrap.servers"] = bootstrap
    return {**settings, **PRODUCER_SETTINGS}


def produce(settings: Mapping[str, object], topic: str, spec: Spec, count: int,
            **pace: Any) -> dict[str, object]:
    """Produce ``count`` generated records (:func:`garmexport.kafka.producer.send`: ``rate``,
    ``progress``, ``progress_s``, ``stop``); return the report (the module docstring)."""
    return send(settings, topic, generate(spec, count), Tally(), **pace)


@contextmanager
def ctrl_c_stops(stop: threading.Event) -> Iterator[None]:
    """Within: the first SIGINT sets ``stop`` (the run ends with its report), a second one
    raises KeyboardInterrupt as usual (it ends the wait for the records in flight)."""
    def first(signum: int, frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    before = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


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

    stop = threading.Event()
    with ctrl_c_stops(stop):
        report = produce(settings, topic, spec, count, rate=args.rate, progress=progress,
                         progress_s=args.progress_s, stop=stop)
    print(json.dumps(report, indent=2) if args.json else _text(report), flush=True)
    if report["failed"]:
        print(f"garmexport produce: {report['failed']} records were not delivered: "
              f"{report['first_failure']}", file=sys.stderr)
    if report["interrupted"]:
        return INTERRUPTED
    return 1 if report["failed"] else 0


def _text(report: Mapping[str, object]) -> str:
    if report["interrupted"]:
        return _interrupted_text(report)
    lines = [f"produced {report['total']} records ({report['value_bytes']} value bytes) to "
             f"{report['topic']} in {report['seconds']} s: {report['records_per_s']} records/s"]
    for group in ("types", "bad", "partitions"):
        counts = report[group]
        assert isinstance(counts, dict)
        lines += [f"  {group:<10} {name:<38} {n:>10}" for name, n in counts.items()]
    return "\n".join(lines)


def _interrupted_text(report: Mapping[str, object]) -> str:
    """What reached the topic before Ctrl-C, in all and per partition."""
    lines = [f"interrupted (Ctrl-C) after {report['seconds']} s: {report['delivered']} "
             f"records delivered to {report['topic']} of {report['total']} produced "
             f"({report['dropped']} not sent yet, dropped; {report['failed']} refused; "
             f"{report['in_flight']} in flight still, fate unknown)"]
    per = report["delivered_partitions"]
    if isinstance(per, dict):
        lines += [f"  {'delivered':<10} {'partition ' + p:<38} {n:>10}" for p, n in per.items()]
    return "\n".join(lines)
