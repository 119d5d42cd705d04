"""The ``garmexport`` command: one argparse front for every subcommand.

Each subcommand lives in its own module ``garmexport.cli.<name>``, imported only when that
subcommand runs (``garmexport --help`` and ``garmexport produce`` do not import pyspark or
thespian). A subcommand module provides::

    def add_arguments(parser: argparse.ArgumentParser) -> None   # optional
    def main(args: argparse.Namespace, config: Config) -> int     # the exit status

This module parses the arguments, builds the one :class:`~garmexport.settings.config.Config`
(``--config FILE``, else ``$GARMEXPORT_CONFIG``, else the built-in defaults; then
``GARMEXPORT_*`` variables), sets up logging, and maps errors to exit codes:

====  =========================================================================
0     success
1     failure at run time (broker, storage, protocol violation, verify found a problem,
      repair left a gap)
2     usage or configuration error; subcommand not available
130   interrupted (Ctrl-C; ``run``: a second SIGINT while stopping)
141   the reader of the output went away (``garmexport produce ... | head -1``): the rest
      of the output is dropped quietly, as a Unix tool killed by SIGPIPE
143   ``run``: a second SIGTERM while stopping (stopped at once; nothing half-written is
      visible, the next start resumes)
====  =========================================================================
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from garmexport import __version__
from garmexport.observe import logs
from garmexport.observe.logs import log_event
from garmexport.process.leave import leave
from garmexport.settings import extras
from garmexport.settings.load import load_config
from garmexport.settings.load import CONFIG_PATH_ENV
from garmexport.errors import ConfigError, GarmexportError

#: name -> (one-line help, description shown by ``garmexport <name> --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("export the topic to Parquet until stopped",
            "Consume the configured topic and write one Parquet dataset per event type,\n"
            "partitioned by UTC day, exactly once. Resumes from the output directory.\n"
            "Stops cleanly on SIGTERM/SIGINT; exits non-zero on an unrecoverable error."),
    "compact": ("compact closed days and update the Hive tables",
                "Rewrite the small files of every day older than compaction.lateness_s into\n"
                "files near compaction.target_file_bytes and keep the external Hive tables\n"
                "in step. Safe to re-run after a crash at any point."),
    "offsets": ("show committed offsets and lag, or set where the next start begins",
                "Show, per partition and event type, the committed offsets read from the\n"
                "output directory and the lag against the topic ('offsets show', the\n"
                "default). 'offsets set' writes markers so that the next start begins at\n"
                "given offsets or at a timestamp, refusing to move back over committed data\n"
                "unless --force."),
    "verify": ("check the output against the topic: every event exactly once",
               "Read every data and quarantine file under the output root and check that\n"
               "each record of the topic is held exactly once. Exit 1 on any finding: a\n"
               "loss, a duplicate, a file that disagrees with itself or cannot be read."),
    "repair": ("fix what verify finds: gaps, duplicates, the quarantine, exactly once",
               "gaps (default): read the records no visible row holds from the broker and\n"
               "publish those at or below their type's committed point. duplicates: take\n"
               "every extra row out through compaction's swap. quarantine: publish what\n"
               "decodes now and take it out of the quarantine. A dry run unless --apply.\n"
               "Exit 1 while something is left (a dry run with work to do included)."),
    "demo": ("run the end-to-end demo",
             "Start a local broker, produce generated events, export them, compact, and\n"
             "verify that every event is in the output exactly once."),
    "produce": ("write generated Garmadon events to a topic",
                "Produce a deterministic stream of Garmadon frames (all event types, a\n"
                "share of late events and, optionally, malformed records) for tests,\n"
                "benchmarks and demos. Prints how many records of each type and each bad\n"
                "kind it wrote (--json for a machine-readable report)."),
    "config": ("print the effective configuration (secrets masked)",
               "Print the configuration after the file and GARMEXPORT_* variables are\n"
               "applied, as TOML, with secrets masked."),
}
_NOT_AVAILABLE = 2
#: 128 + SIGPIPE: what a shell reports for a Unix tool whose reader went away
PIPE_CLOSED = 141
EXIT_CODES = """exit codes:
  0    success
  1    failure at run time (broker, storage, protocol violation, verify found a problem,
       repair left a gap)
  2    usage or configuration error; subcommand not available
  130  interrupted (Ctrl-C; run: a second SIGINT while stopping)
  141  the reader of the output went away (| head): the rest is dropped quietly
  143  run: a second SIGTERM while stopping (stopped at once, nothing half-written)"""


def build_parser(load_command: str | None = None) -> argparse.ArgumentParser:
    """The parser; the subcommand ``load_command`` also gets its module's own options."""
    parser = argparse.ArgumentParser(
        prog="garmexport", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Export Garmadon events from Kafka to Parquet, exactly once.",
        epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"garmexport {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (summary, description) in COMMANDS.items():
        sub = commands.add_parser(name, help=summary, description=description,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("--config", metavar="FILE",
                         help=f"TOML configuration file (default: ${CONFIG_PATH_ENV}, "
                              "else built-in defaults; GARMEXPORT_* variables override)")
        if name == load_command:
            add_arguments = getattr(_command_module(name), "add_arguments", None)
            if add_arguments is not None:
                add_arguments(sub)
    return parser


def _command_module(name: str):  # -> ModuleType; raises ModuleNotFoundError if not written
    return importlib.import_module(f"garmexport.cli.{name}")


def _entry(name: str):  # -> the subcommand's main(args, config) -> int
    return _command_module(name).main


def _requested_command(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def entry() -> NoReturn:
    """The process entry point (the ``garmexport`` command, ``python -m garmexport``): run
    :func:`main` on the process arguments and end with its status through
    :func:`~garmexport.process.leave.leave`, which skips the native teardown that can turn a
    finished command into a SIGABRT. An uncaught exception ends the process the usual way,
    with its traceback."""
    leave(main())


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``garmexport`` with ``argv`` (default: the process arguments); the exit status.

    A closed standard output (``garmexport produce | head -1``) ends the command quietly
    with :data:`PIPE_CLOSED`: Python ignores SIGPIPE, so the write raises BrokenPipeError,
    which would otherwise surface as ``uncaught_exception``, or as "Exception ignored" when
    the interpreter flushes stdout on its way out."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except BrokenPipeError:
        _drop_stdout()
        return PIPE_CLOSED


def _drop_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush writes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _requested_command(argv)
    extra = extras.COMMAND_EXTRAS.get(command or "")
    why = extras.missing(extra) if extra else None
    if why:  # before the parser, which imports the command's module
        print(f"garmexport {command}: {why}", file=sys.stderr)
        return _NOT_AVAILABLE
    try:
        parser = build_parser(command if command in COMMANDS else None)
    except ModuleNotFoundError as missing:
        if missing.name != f"garmexport.cli.{command}":
            raise
        print(f"garmexport {command}: not implemented yet", file=sys.stderr)
        return _NOT_AVAILABLE
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config or os.environ.get(CONFIG_PATH_ENV), os.environ)
    except ConfigError as e:
        print(f"garmexport: configuration error: {e}", file=sys.stderr)
        return 2
    logs.configure(config.log.format, config.log.level, actor_level=config.log.actor_level)
    for old, new, where in config.deprecated:
        log_event(logging.getLogger(__name__), "config_key_renamed", level=logging.WARNING,
                  old=old, new=new, where=where, effect=f"read as {new}; rename it")
    try:
        return int(_entry(args.command)(args, config))
    except KeyboardInterrupt:
        return 130
    except ConfigError as e:
        if config.log.format == "json":  # logging is set up: every stderr line is JSON
            log_event(logging.getLogger(__name__), "configuration_error", level=logging.ERROR,
                      command=args.command, error=str(e))
        else:
            print(f"garmexport {args.command}: configuration error: {e}", file=sys.stderr)
        return 2
    except GarmexportError as e:
        logging.getLogger("garmexport").error("%s: %s", type(e).__name__, e)
        return 1
