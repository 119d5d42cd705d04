"""``garmexport repair duplicates`` and ``garmexport repair quarantine``: the modes that
take rows out of visible files, through compaction's swap. Their steps, planning and
report are :mod:`garmexport.repair.rows_run`'s; this turns the parsed arguments into its
call.
"""

from __future__ import annotations

import argparse

from garmexport.cli.verify import Ticker
from garmexport.settings.config import Config


def main(args: argparse.Namespace, config: Config, storage) -> int:  # noqa: ANN001 - Storage
    from garmexport.cli.compact import sweep_every
    from garmexport.repair import rows_run

    return rows_run.run(config, storage, args.mode, args.apply, tuple(args.day or ()),
                        args.grace_s, args.lease_wait_s,
                        sweep_every(config.hive.register_delay_s),
                        Ticker(args.progress_s, command="repair"))
