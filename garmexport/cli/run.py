"""``garmexport run``: export the topic until stopped."""

from __future__ import annotations

import argparse

from garmexport.settings.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instance", metavar="ID",
                        help="instance id used in temp and marker names (default: host-pid-random)")


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.pipeline.kafka_source import KafkaSource

    # Joining the consumer group takes seconds; start it before loading the exporter's
    # modules and actors (about half a second) so that the two overlap.
    source = KafkaSource(config)
    from garmexport.actors.run_export import run_export  # thespian only when running

    return run_export(config, instance=args.instance, source=source)
