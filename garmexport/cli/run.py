"""``garmexport run``: export the topic until stopped."""

from __future__ import annotations

import argparse
import logging

from garmexport.cli.arg_types import instance_id
from garmexport.settings.config import Config
from garmexport.observe.logs import log_event


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instance", metavar="ID", type=instance_id,
                        help="instance id used in temp and marker names (default: host-pid-random)")


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.pipeline.kafka_source import KafkaSource
    from garmexport.storage.options import from_output
    from garmexport.storage.root_check import prepare_for_run

    # the one command that may create the root: say so, a new root may be a mistyped one
    root = config.output.root
    created = prepare_for_run(root, args.instance or "run", from_output(config.output))
    if created is not None:
        log_event(logging.getLogger(__name__), "output_root_created", root=root, done=created)
    # Joining the consumer group takes seconds; start it before loading the exporter's
    # modules and actors (about half a second) so that the two overlap.
    source = KafkaSource(config)
    from garmexport.actors.run_export import run_export  # thespian only when running

    return run_export(config, instance=args.instance, source=source)
