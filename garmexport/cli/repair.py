"""``garmexport repair``: fix what ``verify`` finds, exactly once. Three modes:

- ``gaps`` (the default): records of the topic that no visible row holds, that the broker
  still holds, and that are at or below W of their type in their partition (committed as
  far as the exporters' resume is concerned, so no exporter will ever write them again) are
  read from the broker and published by the exporter's own writer into their dataset and
  day, or into ``_quarantine`` (:mod:`garmexport.repair.gaps` the plan,
  :mod:`garmexport.repair.apply` its execution). Missing records above W are in
  flight (an exporter writes them) and left alone; records retention took are reported as
  lost for good. Order matters: the committed state first, the output second, the topic
  third (the plan module says why).
- ``duplicates`` and ``quarantine``: rows taken out of visible files through compaction's
  swap (:mod:`garmexport.cli.repair_rows`).

A dry run by default: it prints what it would do per dataset (or quarantine) and day;
``--apply`` does it. Exit status: 0 when nothing the mode fixes is left (after
``--apply``; records in flight are not the mode's to fix), 1 when something is (a dry run
with something to do, a record lost for good or left twice, a publish that met another's
file, a file that could not be read), 2 for a configuration error.
"""

from __future__ import annotations

import argparse
import os

from garmexport.cli.arg_types import day_arg, non_negative_float, positive_float
from garmexport.cli.verify import Ticker
from garmexport.errors import BrokerError, ConfigError
from garmexport.protocol.naming import day_dir
from garmexport.settings.config import Config

_SHOWN = 10  # stretches printed per (place, day), runs of lost offsets in all
HELP = """Fix what 'garmexport verify' reports, exactly once; a dry run unless --apply.

gaps (the default): a record is filled when no visible row holds it, the broker still
holds it, and its offset is at or below W (the committed point) of its type in its
partition, as the exporters' resume reads it from the markers: no exporter will write it
again. It is routed and decoded by the exporter's rules and published into <type>/day=D/
(or _quarantine/day=D/) under a name that follows from what the file holds, with the
exporter's exclusive publish: a rerun after a kill, or two repairs at once, never publish
a record twice. Missing records above W are in flight: the exporters write them, repair
leaves them. Records the broker no longer holds (retention) are listed as lost for good.
Reads the topic from the broker like verify, up to its end as the read began (printed):
records that arrive after it are not read; they are above W, the exporters' to write.

duplicates: every record held by more than one row keeps one; the other rows are taken
out of their files through compaction's swap (journal, metastore view and flip, --grace-s,
roll-forward after a kill), under compaction's lease. The copy kept is one in a file that
cannot be rewritten (a JVM exporter's file, a raw file above its type's committed point or
of a day not closed yet: compaction.lateness_s), else a dataset's over the quarantine's.
No broker needed.

quarantine: the quarantined records of --day (every day by default) are decoded again
with today's code and settings; each that decodes now is published into its dataset (at
or below its type's committed point, as gaps do) and taken out of the quarantine; each
that still fails stays, with its new reason. No broker needed.

exit status: 0 nothing the mode fixes is left (records in flight, above the committed
point, are the exporters' to write: they do not count); 1 something is (a dry run with
work to do, records lost for good or left twice, a conflict or an unreadable file); 2
configuration error."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = HELP
    parser.add_argument("mode", nargs="?", default="gaps",
                        choices=("gaps", "duplicates", "quarantine"),
                        help="what to repair (default: gaps)")
    parser.add_argument("--apply", action="store_true",
                        help="do it (default: a dry run, printing what would be done)")
    parser.add_argument("--day", action="append", type=day_arg, metavar="YYYY-MM-DD",
                        help="duplicates, quarantine: only this day's directories; "
                             "repeatable (default: every day)")
    parser.add_argument("--grace-s", type=non_negative_float, default=None, metavar="S",
                        help="duplicates, quarantine: seconds the files a metastore query "
                             "may have listed are kept after the flip (default: "
                             "compaction.retired_grace_s, 3600; 0 swaps at once)")
    parser.add_argument("--lease-wait-s", type=non_negative_float, default=3 * 3600.0,
                        metavar="S", help="duplicates, quarantine: longest wait for a "
                        "compaction (or another repair) of the root to end (default 10800)")
    parser.add_argument("--timeout-s", type=positive_float, default=600.0, metavar="S",
                        help="longest time to read the topic to its end (default 600)")
    parser.add_argument("--progress-s", type=non_negative_float, default=5.0, metavar="S",
                        help="print progress to stderr at most every S seconds (default 5)")


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.storage.options import from_output
    from garmexport.storage.root_check import open_existing

    storage = open_existing(config.output.root, f"repair-{os.getpid()}",
                            from_output(config.output))
    try:
        if args.mode != "gaps":
            from garmexport.cli import repair_rows
            return repair_rows.main(args, config, storage)
        if args.day or args.grace_s is not None:
            raise ConfigError("--day and --grace-s are for the duplicates and quarantine "
                              "modes: gaps fills every day below the committed points")
        return _repair(args, config, storage)
    finally:
        storage.close()


def _repair(args: argparse.Namespace, config: Config, storage) -> int:  # noqa: ANN001 - Storage
    from garmexport.pipeline.recovery import read_partition_state
    from garmexport.pipeline.router import OriginBatch, Window, route
    from garmexport.kafka.topic_scan import partitions_of, scan
    from garmexport.repair.apply import apply
    from garmexport.repair.gaps import lost_runs, plan
    from garmexport.verify.root_read import read_root

    src = config.source
    tick = Ticker(args.progress_s, command="repair")
    try:
        parts = partitions_of(config.consumer_settings(), src.topic)
    except BrokerError as exc:
        raise BrokerError(f"{exc}; repair reads the missing records from the broker") from None
    # 1. the committed state, before the output (a record committed then is listed next)
    states = {p: read_partition_state(storage, src.cluster, src.topic, p).state for p in parts}

    # 2. the output, as verify reads it
    root = read_root(storage, src.topic, config.jvm.cluster, config.output.root, tick)
    held = root.held
    tick(lambda s: f"read {len(held)} offsets from the output in {s:.1f} s", force=True)

    # 3. the topic: every record no row holds, routed as the exporter routes it
    window = Window.of(config.protocol)
    missing: dict[tuple[int, str], OriginBatch] = {}
    first: dict[int, int] = {}
    seen = [0]

    def on_records(partition: int, records: list) -> None:
        seen[0] += len(records)
        absent = [r for r in records if (partition, r.offset()) not in held]
        if absent:
            for origin, batch in route(absent, {}, window).batches.items():
                got = missing.get((partition, origin))
                if got is None:
                    missing[(partition, origin)] = batch
                else:
                    got.extend(batch)
        tick(lambda s: f"reading topic {src.topic!r}: {seen[0]} records, {s:.0f} s")

    ends = scan(config.consumer_settings(), src.topic, on_records, timeout_s=args.timeout_s,
                firsts=first)
    print(f"topic {src.topic!r} read up to its end as the read began: "
          + ", ".join(f"partition {p} at {end}" for p, end in sorted(ends.items()))
          + "; records after it are not read (they came in meanwhile: the exporters')",
          flush=True)
    tick(lambda s: f"read {seen[0]} records from topic {src.topic!r}: "
                   f"{sum(len(b.offsets) for b in missing.values())} held by no row", force=True)
    held_by: dict[int, list[int]] = {}
    for p, o in held:
        held_by.setdefault(p, []).append(o)
    lost = [run for p in parts
            for run in lost_runs(p, held_by.get(p, []), first.get(p, 0))]
    todo = plan(missing, states, lost)
    _print_plan(todo, args.apply)
    problems = [u.describe() for u in root.unreadable]
    for line in problems[:_SHOWN]:
        print(f"unreadable file {line}")
    if problems and todo.fills and args.apply:
        print("not applied: a file that cannot be read holds rows no listing can see (or "
              "was deleted while read, as compaction does): fix it, then run repair again")
    if not args.apply or problems:
        return _summary(todo, 0, 0, problems, applied=False, took_s=tick.elapsed())

    def on_file(fill, p) -> None:  # noqa: ANN001 - Fill, Published
        print(f"published {p.path}: {p.rows} rows, offsets {p.first_offset}..{p.last_offset}",
              flush=True)

    done = apply(config, storage, todo.fills, on_file)
    for fill, path in done.conflicts:
        print(f"conflict: {path} was published by another writer first (another repair?); "
              f"partition {fill.partition} {fill.origin}: run repair again to recompute")
    if done.hive_problem:
        print(f"hive: the repaired days are not all registered ({done.hive_problem}); "
              "garmexport compact registers them")
    rows = sum(p.rows for _, p in done.published)
    return _summary(todo, rows, len(done.published), problems + [p for _, p in done.conflicts],
                    applied=True, took_s=tick.elapsed())


def _print_plan(todo, apply: bool) -> None:  # noqa: ANN001 - Plan
    verb = "adding" if apply else "would add"
    for (place, day), found in todo.by_place(todo.adds).items():
        print(f"{day_dir(place, day)}: {verb} {sum(s.count for s in found)} rows: "
              + "; ".join(s.describe() for s in found[:_SHOWN])
              + (" ..." if len(found) > _SHOWN else ""))
    flight: dict[int, list[int]] = {}  # per partition: first, last, count (a running
    for s in todo.in_flight:            # exporter's tail: one line per partition is enough)
        got = flight.setdefault(s.partition, [s.first, s.last, 0])
        got[:] = [min(got[0], s.first), max(got[1], s.last), got[2] + s.count]
    for p, (first, last, count) in sorted(flight.items()):
        print(f"partition {p}: {count} missing records in flight (offsets {first}..{last}, "
              "above the committed point of their type): left to the exporter")
    for run in todo.lost[:_SHOWN]:
        print(f"lost for good: partition {run.partition} offsets {run.first}..{run.last} "
              f"({run.count}): no row holds them and the broker no longer does (retention); "
              "records of a type that is not exported cannot be told apart any more")
    if len(todo.lost) > _SHOWN:
        more = todo.lost[_SHOWN:]
        print(f"lost for good: {len(more)} more runs of offsets ({sum(r.count for r in more)} "
              "offsets) below the broker's first offset")
    for p in todo.unmarked:
        print(f"partition {p} has no marker: nothing is committed there yet, nothing filled "
              "(run the exporter, or 'offsets set --from-jvm' on a JVM exporter's root)")


def _summary(todo, rows: int, files: int, problems: list[str], applied: bool,  # noqa: ANN001 - Plan
             took_s: float) -> int:
    """The last line; the exit status: 0 when no gap below the committed points is left."""
    flight = sum(s.count for s in todo.in_flight)
    lost = sum(r.count for r in todo.lost)
    left = todo.rows - rows
    done = (f"added {rows} rows in {files} files; {left} not added" if applied else
            f"dry run: would add {todo.rows} rows in {len(todo.by_place(todo.adds))} "
            "(dataset, day) pairs" + (" (run with --apply to add them)" if todo.rows else ""))
    print(f"repair: {done}; {flight} in flight, left to the exporter; {lost} lost for good; "
          f"{len(problems)} problems; took {took_s:.1f} s")
    return 0 if left == 0 and lost == 0 and not problems else 1
