"""``garmexport run``: export the topic until stopped."""

from __future__ import annotations

import argparse
import logging

from garmexport.settings.config import Config

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instance", metavar="ID",
                        help="instance id used in temp and marker names (default: host-pid-random)")


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.pipeline.kafka_source import KafkaSource

    if config.jvm.takeover:
        _take_over_before_joining(config)
    # Joining the consumer group takes seconds; start it before loading the exporter's
    # modules and actors (about half a second) so that the two overlap.
    source = KafkaSource(config)
    from garmexport.actors.run_export import run_export  # thespian only when running

    return run_export(config, instance=args.instance, source=source)


def _take_over_before_joining(config: Config) -> None:
    """Partitions without a marker on a JVM exporter's root are taken over here, outside the
    group. Without the broker's partition list, or with the store failing, the assignment
    does it instead (as it did before this step existed): a start is never refused here for
    what the assignment would wait out."""
    from garmexport.errors import BrokerError, StorageError
    from garmexport.observe.logs import log_event
    from garmexport.pipeline.jvm_takeover import before_joining
    from garmexport.tools.broker_scan import REACH_TIMEOUT_S, partitions_of

    try:
        partitions = partitions_of(config.consumer_settings(), config.source.topic,
                                   REACH_TIMEOUT_S)
        before_joining(config, partitions)
    except (BrokerError, StorageError) as exc:
        log_event(log, "jvm_takeover_deferred", level=logging.WARNING, error=str(exc),
                  reason="partitions without a marker are taken over in the assignment")
