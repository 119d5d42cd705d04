"""``garmexport verify``: check the output holds every record of the topic exactly once.

While it reads (a large output takes minutes), it prints progress to stderr at most every
``--progress-s`` seconds: files read of all, rows, records read from the topic, elapsed
time. The report names the files of each duplicate and the files bordering each gap, in
words, every file whose name disagrees with its footer or its rows, and every file that
cannot be read (not Parquet, truncated) with pyarrow's reason: the other files are still
checked, and the exit status is 1 as for any finding. A root whose files are all of other
topics than ``source.topic`` is a configuration error (exit 2) naming them, before the
topic is read: the check would be of nothing.

On a topic that records keep arriving at, with exporters running: the committed points
are read first, then the output, then the topic up to its end as that read began (the
``end`` column, ``end`` in ``--json``); records that arrive after it are not read. Missing
records above their type's committed point are in flight (an exporter writes them),
counted and not a finding.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from garmexport.observe import logs
from garmexport.cli.arg_types import non_negative_float, positive_float
from garmexport.settings.config import Config
from garmexport.errors import BrokerError

_SHOWN = 10  # duplicate groups and gaps printed per partition (--json lists more)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-broker", action="store_true",
                        help="check the output alone (duplicates, files that disagree or "
                             "cannot be read); do not read the topic: missing, misplaced "
                             "and unexpected show as not checked ('-' in the table, null "
                             "in --json)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--timeout-s", type=positive_float, default=600.0, metavar="S",
                        help="longest time to read the topic to its end (default 600)")
    parser.add_argument("--progress-s", type=non_negative_float, default=5.0, metavar="S",
                        help="print progress to stderr at most every S seconds (default 5; "
                             "0: after every file)")


class Ticker:
    """Prints ``text()`` to stderr when ``every_s`` have passed since the last line, as a
    progress line of ``command``."""

    def __init__(self, every_s: float, clock: Callable[[], float] = time.monotonic,
                 command: str = "verify") -> None:
        self.every_s, self.clock, self.command = every_s, clock, command
        self.started = self.last = clock()

    def __call__(self, text: Callable[[float], str], force: bool = False) -> None:
        now = self.clock()
        if force or now - self.last >= self.every_s:
            self.last = now
            logs.progress(self.command, text(now - self.started))

    def elapsed(self) -> float:
        """Seconds since the command started."""
        return self.clock() - self.started


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.storage.options import from_output
    from garmexport.storage.root_check import open_existing
    from garmexport.pipeline.recovery import read_partition_state
    from garmexport.pipeline.router import Window
    from garmexport.kafka.topic_scan import partitions_of, scan
    from garmexport.verify.root_read import read_root
    from garmexport.verify.count import compare, expected_from_records

    tick = Ticker(args.progress_s)
    # the root first: a mistyped one is the error to report, whatever the broker does
    storage = open_existing(config.output.root, "verify", from_output(config.output))
    src = config.source
    states = {}
    if not args.no_broker:  # before the output, which can take minutes to read
        try:
            parts = partitions_of(config.consumer_settings(), src.topic)
        except BrokerError as exc:
            raise BrokerError(f"{exc}; pass --no-broker to check only the output directory "
                              "(duplicates)") from None
        # the committed points before the output: a record at or below one was published
        # before the output is read, so one that no row holds is missing; one above it
        # that no row holds is in flight (an exporter writes it), as repair reads them
        states = {p: read_partition_state(storage, src.cluster, src.topic, p).state
                  for p in parts}

    disagreeing: list = []
    root = read_root(storage, config.source.topic, config.jvm.cluster, config.output.root,
                     tick, disagreeing)
    held, files = root.held, root.files
    tick(lambda s: f"read {len(held)} offsets from {files} files under {storage.uri} "
                   f"in {s:.1f} s", force=True)
    expected: dict[int, dict[int, str]] | None = None
    days: dict[int, dict[int, str]] = {}  # offset -> day of its row, from the broker
    first: dict[int, int] = {}  # per partition, the first offset the broker still holds
    ends: dict[int, int] | None = None
    above: dict[int, set[int]] = {}  # offsets above their type's committed point
    if not args.no_broker:
        found: dict[int, dict[int, str]] = {}
        seen = [0]
        window = Window.of(config.protocol)  # the exporters' own, for where a record goes

        def on_records(partition: int, records: list) -> None:
            found.setdefault(partition, {}).update(expected_from_records(
                partition, records, days.setdefault(partition, {}), window=window,
                held=held, state=states.get(partition),
                above=above.setdefault(partition, set())))
            seen[0] += len(records)
            tick(lambda s: f"reading topic {config.source.topic!r}: {seen[0]} records, "
                           f"{s:.0f} s")

        ends = scan(config.consumer_settings(), config.source.topic, on_records,
                    timeout_s=args.timeout_s, firsts=first)
        tick(lambda s: f"read {seen[0]} records from topic {config.source.topic!r} "
                       f"in {s:.1f} s, up to its end as the read began", force=True)
        expected = found
    report = compare(held, files, expected, root.jvm, disagreeing=disagreeing,
                     unreadable=root.unreadable, days=days,
                     first=first if expected is not None else None, ends=ends, above=above)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _print_table(report)
    return 0 if report.ok else 1


def _print_table(report) -> None:
    print(f"{'partition':>9} {'rows':>10} {'quarantined':>11} {'broker':>10} {'end':>10} "
          f"{'duplicates':>10} {'missing':>8} {'in flight':>9} {'misplaced':>9} "
          f"{'unexpected':>10}")
    def n(found: list) -> str:  # "-": a check against the broker not made (--no-broker)
        count = report.broker_count(found)
        return "-" if count is None else str(count)

    for p, r in sorted(report.partitions.items()):
        print(f"{p:>9} {r.rows:>10} {r.quarantined:>11} "
              f"{'-' if r.broker_records is None else r.broker_records:>10} "
              f"{'-' if r.end is None else r.end:>10} "
              f"{len(r.duplicates):>10} {n(r.missing):>8} {n(r.in_flight):>9} "
              f"{n(r.misplaced):>9} {n(r.unexpected):>10}")
        if r.before_retention:
            print(f"{'':>9} {r.before_retention} rows below the broker's first offset "
                  "(retention): checked for duplicates only")
        if r.in_flight:
            print(f"{'':>9} {len(r.in_flight)} records in flight (offsets {r.in_flight[0]}.."
                  f"{r.in_flight[-1]}, above the committed point of their type): not "
                  "published yet, the exporters write them")
        for what in ("duplicates", "missing", "misplaced", "unexpected"):
            if getattr(r, what):
                print(f"{'':>9} {what}: {getattr(r, what)[:10]}"
                      f"{' ...' if len(getattr(r, what)) > 10 else ''}")
        for g in r.duplicate_files[:_SHOWN]:
            print(f"{'':>9} duplicate offsets {g.first}..{g.last} ({g.count}) held by: "
                  + ", ".join(g.files))
        for gap in r.gaps[:_SHOWN]:
            print(f"{'':>9} gap in {gap.dataset}: {gap.describe()}")
        for d in r.disagreeing:
            print(f"{'':>9} {d.describe()}")
        hidden = max(0, len(r.duplicate_files) - _SHOWN) + max(0, len(r.gaps) - _SHOWN)
        if hidden:
            print(f"{'':>9} ... {hidden} more duplicate groups or gaps: see --json")
    for u in report.unreadable[:_SHOWN]:
        print(f"unreadable file {u.describe()}")
    if len(report.unreadable) > _SHOWN:
        print(f"... {len(report.unreadable) - _SHOWN} more unreadable files: see --json")
    if report.jvm_files or report.foreign_jvm_files:
        beats = sum(r.heartbeats for r in report.partitions.values())
        rows = sum(r.jvm_rows for r in report.partitions.values())
        print(f"JVM exporter files: {report.jvm_files} read ({rows} data rows counted above, "
              f"{beats} heartbeat rows apart), {len(report.foreign_jvm_files)} of another "
              "cluster tag not read")
    print(report.verdict())
