"""``garmexport run``: export the topic until stopped.

With ``actors.parallelism`` 1 this process is the exporter. Above 1 it is the supervisor
of that many readers (:mod:`garmexport.instance.supervisor`), each started as
``garmexport run --reader rK --parent PID --stop-report FILE``: options the operator never
types.
"""

from __future__ import annotations

import argparse
import logging

from garmexport.cli.arg_types import instance_id
from garmexport.settings.config import Config
from garmexport.observe.logs import log_event

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instance", metavar="ID", type=instance_id,
                        help="instance id used in temp and marker names (default: host-pid-random)")
    # set by the supervisor for the readers it starts
    parser.add_argument("--reader", help=argparse.SUPPRESS)
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--stop-report", help=argparse.SUPPRESS)


def _prepare_root(args: argparse.Namespace, config: Config) -> None:
    """run is the one command that may create the output root: it says so, since a new
    root may be a mistyped one. Raises ConfigError for a root that is a file."""
    from garmexport.storage.options import from_output
    from garmexport.storage.root_check import prepare_for_run

    root = config.output.root
    created = prepare_for_run(root, args.instance or "run", from_output(config.output))
    if created is not None:
        log_event(logging.getLogger(__name__), "output_root_created", root=root, done=created)


def main(args: argparse.Namespace, config: Config) -> int:
    if args.parent is not None:
        from garmexport.process.parent_death import die_with

        die_with(args.parent)  # first: a reader never outlives its supervisor
    if args.reader is None and config.actors.readers() > 1:
        return _supervise(args, config)
    if args.reader is not None:
        from garmexport.process import stop_signal

        stop_signal.record()  # the supervisor started it with the stop signals held back
        _log_as(config, args.reader)
    elif _metrics_port_busy(config):
        return 2
    from garmexport.kafka.source import KafkaSource

    _prepare_root(args, config)
    if config.jvm.takeover and args.reader is None:  # a reader's supervisor did it
        _take_over_before_joining(config)
    # Joining the consumer group takes seconds; start it before loading the exporter's
    # modules and actors (about half a second) so that the two overlap.
    source = KafkaSource(config)
    from garmexport.actors.run_export import run_export  # thespian only when running

    return run_export(config, instance=args.instance, source=source,
                      stop_report=args.stop_report)


def _supervise(args: argparse.Namespace, config: Config) -> int:
    from garmexport.instance.supervisor import run_supervisor
    from garmexport.observe.metrics_merge import SUPERVISOR
    from garmexport.process.in_child import call_in_child
    from garmexport.process.instance_id import new_instance_id

    _log_as(config, SUPERVISOR)
    if _metrics_port_busy(config):
        return 2
    _prepare_root(args, config)  # once, before its readers start
    if config.jvm.takeover:
        # once for the instance, before any reader joins; in a child, so that the
        # supervisor never loads pyarrow and librdkafka (52 MB of RSS, DESIGN.md 9.10)
        call_in_child(_take_over_before_joining, config)
    return run_supervisor(config, args.instance or new_instance_id(), args.config)


def _metrics_port_busy(config: Config) -> bool:
    """Whether the instance's metrics port cannot be bound, checked before anything waits
    on the broker (the JVM root's takeover, the group join): then the same two lines on
    both paths as a failure of the exporter (``failure``, ``stopped`` with code 2), which
    name the port and the setting; the traceback only at DEBUG."""
    import time
    import traceback

    from garmexport.errors import ConfigError
    from garmexport.observe.health import check_listen

    started = time.monotonic()
    try:
        check_listen(config.metrics.host, config.metrics.port)
        return False
    except ConfigError as exc:
        detail = {"detail": traceback.format_exc()} if log.isEnabledFor(logging.DEBUG) else {}
        log_event(log, "failure", level=logging.ERROR, where="start", error=str(exc), **detail)
        log_event(log, "stopped", code=2, reason=f"start: {exc}",
                  seconds=round(time.monotonic() - started, 3))
        return True


def _log_as(config: Config, reader: str) -> None:
    """Logs as configured, every line naming ``reader`` (``r0``..., or the supervisor)."""
    from garmexport.observe import logs

    logs.configure(config.log.format, config.log.level, actor_level=config.log.actor_level,
                   fields={"reader": reader})


def _take_over_before_joining(config: Config) -> None:
    """Partitions without a marker on a JVM exporter's root are taken over here, outside the
    group. Without the broker's partition list, or with the store failing, the assignment
    does it instead (as it did before this step existed): a start is never refused here for
    what the assignment would wait out."""
    from garmexport.errors import BrokerError, StorageError
    from garmexport.observe.logs import log_event
    from garmexport.pipeline.jvm_takeover import before_joining
    from garmexport.kafka.topic_scan import REACH_TIMEOUT_S, partitions_of

    try:
        partitions = partitions_of(config.consumer_settings(), config.source.topic,
                                   REACH_TIMEOUT_S)
        before_joining(config, partitions)
    except (BrokerError, StorageError) as exc:
        if isinstance(exc, BrokerError) and not _holds_jvm_files(config):
            # a new topic, a broker not up yet: with no JVM file in the root there is
            # nothing to take over, and nothing to warn about
            log.debug("jvm takeover skipped: %s; no JVM exporter file in the root", exc)
            return
        log_event(log, "jvm_takeover_deferred", level=logging.WARNING, error=str(exc),
                  reason="partitions without a marker are taken over in the assignment")


def _holds_jvm_files(config: Config) -> bool:
    """Whether the output root holds a Garmadon JVM exporter file (True when the store
    cannot tell: then the takeover is said to be deferred, as before)."""
    from garmexport.errors import StorageError
    from garmexport.pipeline.jvm_recovery import holds_jvm_files
    from garmexport.pipeline.router import exported_origins
    from garmexport.storage.open import open_output

    try:
        storage = open_output(config.output, "jvm-probe")
    except StorageError:
        return True
    try:
        return holds_jvm_files(storage, exported_origins())
    except StorageError:
        return True
    finally:
        storage.close()
