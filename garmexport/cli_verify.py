"""``garmexport verify``: check the output holds every record of the topic exactly once."""

from __future__ import annotations

import argparse
import json
import sys
import time

from garmexport.config import Config
from garmexport.errors import BrokerError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-broker", action="store_true",
                        help="only check the output for duplicate offsets; do not read the topic")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--timeout-s", type=float, default=600.0,
                        help="longest time to read the topic to its end (default 600)")


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.actor_support import storage_for
    from garmexport.broker_scan import partitions_of, scan
    from garmexport.verify import compare, expected_from_records, read_output

    started = time.monotonic()
    if not args.no_broker:  # before the output, which can take minutes to read
        try:
            partitions_of(config.consumer_settings(), config.source.topic)
        except BrokerError as exc:
            raise BrokerError(f"{exc}; pass --no-broker to check only the output directory "
                              "(duplicates)") from None
    storage = storage_for(config, "verify")
    held, files = read_output(storage, config.source.topic)
    print(f"verify: read {len(held)} offsets from {files} files under {storage.uri} "
          f"in {time.monotonic() - started:.1f} s", file=sys.stderr)
    expected = None
    if not args.no_broker:
        expected = {}

        def on_records(partition: int, records: list) -> None:
            expected.setdefault(partition, {}).update(expected_from_records(partition, records))

        scan(config.consumer_settings(), config.source.topic, on_records, timeout_s=args.timeout_s)
        print(f"verify: read {sum(len(v) for v in expected.values())} records from topic "
              f"{config.source.topic!r} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    report = compare(held, files, expected)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(f"{'partition':>9} {'rows':>10} {'quarantined':>11} {'broker':>10} "
              f"{'duplicates':>10} {'missing':>8} {'misplaced':>9} {'unexpected':>10}")
        for p, r in sorted(report.partitions.items()):
            print(f"{p:>9} {r.rows:>10} {r.quarantined:>11} "
                  f"{'-' if r.broker_records is None else r.broker_records:>10} "
                  f"{len(r.duplicates):>10} {len(r.missing):>8} {len(r.misplaced):>9} "
                  f"{len(r.unexpected):>10}")
            for what in ("duplicates", "missing", "misplaced", "unexpected"):
                if getattr(r, what):
                    print(f"{'':>9} {what}: {getattr(r, what)[:10]}"
                          f"{' ...' if len(getattr(r, what)) > 10 else ''}")
        print("verify: OK, every record exactly once" if report.ok else "verify: FAILED")
    return 0 if report.ok else 1
