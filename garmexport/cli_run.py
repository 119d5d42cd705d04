"""``garmexport run``: export the topic until stopped."""

from __future__ import annotations

import argparse

from garmexport.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instance", metavar="ID",
                        help="instance id used in temp and marker names (default: host-pid-random)")


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.run_export import run_export  # thespian only when running

    return run_export(config, instance=args.instance)
