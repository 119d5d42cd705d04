"""``garmexport repair``: fix what ``verify`` finds, exactly once. Three modes:

- ``gaps`` (the default): records of the topic that no visible row holds, that the broker
  still holds, and that are at or below W of their type in their partition (committed as
  far as the exporters' resume is concerned, so no exporter will ever write them again) are
  read from the broker and published by the exporter's own writer into their dataset and
  day, or into ``_quarantine`` (:mod:`garmexport.repair.gaps_run` the order of the
  steps, :mod:`garmexport.repair.gaps` the plan, :mod:`garmexport.repair.apply` its
  execution). Missing records above W are in flight (an exporter writes them) and left
  alone; records retention took are reported as lost for good. Order matters: the
  committed state first, the output second, the topic third (the plan module says why).
- ``duplicates`` and ``quarantine``: rows taken out of visible files through compaction's
  swap (:mod:`garmexport.repair.rows_run`).

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
from garmexport.errors import ConfigError
from garmexport.repair import gaps_run
from garmexport.settings.config import Config

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
        return gaps_run.run(config, storage, args.apply, args.timeout_s,
                            Ticker(args.progress_s, command="repair"))
    finally:
        storage.close()
