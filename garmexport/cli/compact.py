"""``garmexport compact``: the command-line face of compaction.

:func:`add_arguments` declares the options on the subcommand's parser;
:func:`main` turns ``args`` and the frozen config into :class:`CompactOptions`
(an option given on the command line wins over ``[compaction]`` in the config), finishes
the swaps a crashed run left where that needs no Spark (:mod:`.compaction.before_spark`:
seconds instead of a Spark start), starts Spark with its Hadoop client told what
``[output]`` tells the exporter (:mod:`.compaction.hadoop_conf`: the HDFS user or the
Kerberos login, the bucket's S3A settings, and a clear error when Spark has no file system
for the root or no Kerberos login), runs one compaction, prints the summary and returns
the exit code (0: done, 1: some files had problems and were left alone).
Errors of the protocol or the store propagate.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from typing import Any

from garmexport.compaction import hadoop_conf
from garmexport.compaction.before_spark import finish_swaps
from garmexport.compaction.fs import open_fs
from garmexport.compaction.recover import Recovered
from garmexport.storage.hadoop_uri import spark_root
from garmexport.storage.kerberos import check_keytab
from garmexport.storage.options import from_output
from garmexport.storage.root_check import SETTING, require
from garmexport.compaction.job import CompactOptions, run
from garmexport.compaction.run_state import Summary
from garmexport.compaction.report import reported
from garmexport.compaction.spark_job import build_session
from garmexport.compaction.spark_logs import LEVELS
from garmexport.errors import ConfigError
from garmexport.hive.tables import TableNaming
from garmexport.observe.logs import log_event

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("--output", action="append", default=None, metavar="NAME",
      help="dataset (event type output name) to compact; repeatable; default: all")
    a("--day", action="append", default=None, metavar="YYYY-MM-DD",
      help="only this closed day; repeatable; default: every closed day")
    a("--lateness-s", type=float, default=None, metavar="S",
      help="seconds after a day's end (in event time) before it is closed "
           "(default: compaction.lateness_s)")
    a("--target-file-bytes", type=int, default=None, metavar="BYTES",
      help="size compacted files aim at (default: compaction.target_file_bytes)")
    a("--sort-columns", default=None, metavar="A,B,...",
      help="comma-separated columns to sort each file by (default: compaction.sort_columns)")
    a("--codec", default=None,
      help="Parquet codec: zstd, snappy, gzip, lz4, none (default: compaction.codec)")
    a("--database", default=None, metavar="NAME",
      help="Hive database of the tables (default: hive.database)")
    a("--metastore-uri", default=None, metavar="URI",
      help="thrift:// URI of a Hive metastore (default: hive.metastore_uri)")
    a("--master", default=None, metavar="URL",
      help="Spark master URL (default: compaction.spark_master)")
    a("--spark-conf", action="append", default=None, metavar="KEY=VALUE",
      help="extra Spark setting; repeatable")
    a("--spark-log-level", type=str.upper, default=None, choices=LEVELS,
      help="lowest level of Spark's JVM log records shown (default: "
           "compaction.spark_log_level, ERROR unless set)")
    a("--no-hive", action="store_true", help="do not create or update Hive tables")
    a("--dry-run", action="store_true",
      help="plan and print, change nothing: no lease (a running compaction is not waited "
           "for), no recovery; a day with an unfinished swap is counted, not planned")
    a("--grace-s", type=float, default=None,
      help="seconds the files a metastore query may have listed are kept after the "
           "partition left them: the run waits this long after flipping a day to its "
           "compacted view before it changes the day directory (default: "
           "compaction.retired_grace_s, 3600; 0 swaps at once)")
    a("--show-counts", action="store_true",
      help="after compacting, print rows per table and day read through the Hive tables")


def _opt(args: argparse.Namespace, name: str, default: Any) -> Any:
    value = getattr(args, name, None)
    return default if value is None else value


def options_from(args: argparse.Namespace, config: Any) -> CompactOptions:
    """CompactOptions from the command line over the config's ``[compaction]``."""
    c = config.compaction
    sort = _opt(args, "sort_columns", None)
    if _opt(args, "grace_s", 0.0) < 0:
        raise ConfigError(f"--grace-s {args.grace_s}: must be 0 or more seconds")
    return CompactOptions(
        root_uri=spark_root(config.output.root, c.hadoop_root),
        lateness_s=float(_opt(args, "lateness_s", c.lateness_s)),
        target_file_bytes=int(_opt(args, "target_file_bytes", c.target_file_bytes)),
        sort_columns=tuple(s.strip() for s in sort.split(",") if s.strip())
        if sort is not None else tuple(c.sort_columns),
        codec=_opt(args, "codec", c.codec),
        hive=not getattr(args, "no_hive", False),
        tables=replace(TableNaming.of(config.hive), database=_opt(args, "database",
                                                                  config.hive.database)),
        outputs=tuple(_opt(args, "output", ())),
        days=tuple(_opt(args, "day", ())),
        dry_run=bool(getattr(args, "dry_run", False)),
        grace_s=float(_opt(args, "grace_s", c.retired_grace_s)),
        sweep_every_s=sweep_every(config.hive.register_delay_s))


def sweep_every(register_delay_s: float) -> float:
    """How often a waiting swap's view takes the exporter's new files: a quarter of the
    delay the exporter promises for new partitions, between 1 and 15 s."""
    return max(1.0, min(15.0, register_delay_s / 4))


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in _opt(args, "spark_conf", []):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"--spark-conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf


def main(args: argparse.Namespace, config: Any) -> int:
    """Run one compaction over ``config.output.root``; print progress and the summary."""
    opts = options_from(args, config)
    # a mistyped root is an error, never a new empty output; looked at through the file
    # system compaction uses (on a cluster, Hadoop's: WebHDFS may not be reachable), and
    # for a local root before Spark starts (seconds)
    hadoop_root = config.compaction.hadoop_root
    setting, root = (("compaction.hadoop_root (GARMEXPORT_COMPACTION_HADOOP_ROOT)", hadoop_root)
                     if hadoop_root else (SETTING, config.output.root))
    if opts.root_uri.startswith("file://"):
        require(open_fs(None, opts.root_uri).root_state(), root, setting)
    metastore_uri = _opt(args, "metastore_uri", config.hive.metastore_uri)
    store = from_output(config.output)
    # Spark's JVM logs in from the exporter's keytab (hadoop_conf.kerberos_conf): a keytab
    # or KDC that cannot give a ticket is one line here, not a Java stack trace from Spark
    given = spark_conf(args)
    login = hadoop_conf.kerberos_conf(opts.root_uri, store)
    if login:
        check_keytab(store.webhdfs.kerberos)
    early = Recovered(0, 0)
    if not opts.dry_run:  # a crashed run's swap first: readers wait for it, not for Spark
        early = finish_swaps(opts.root_uri, config.output.root, store,
                             metastore_uri if opts.hive else "", config.hive.timeout_s,
                             opts.tables, opts.lease_wait_s, int(time.time() * 1000),
                             opts.grace_s)
    started = time.monotonic()
    # Spark's Hadoop client reaches the root as the exporter does (hadoop_conf): the HDFS
    # user or the Kerberos login at the JVM's launch, the S3A settings in the running session
    launch = hadoop_conf.with_java_options(hadoop_conf.with_kerberos(given, login),
                                           hadoop_conf.java_options(opts.root_uri, store))
    spark = build_session(_opt(args, "master", config.compaction.spark_master),
                          metastore_uri, launch, log_level=_opt(
                              args, "spark_log_level", config.compaction.spark_log_level))
    log_event(log, "compaction_spark_ready", seconds=round(time.monotonic() - started, 1))
    try:
        hadoop_conf.apply(spark, hadoop_conf.hadoop_settings(opts.root_uri, store), given)
        hadoop_conf.check_scheme(spark, opts.root_uri, setting)
        hadoop_conf.check_kerberos(spark, opts.root_uri, store)
        fs = open_fs(spark, opts.root_uri)
        require(fs.root_state(), root, setting)
        summary = reported(config.compaction, opts.root_uri, opts.dry_run, lambda: counted(
            run(spark, fs, opts, int(time.time() * 1000)), early))
        if getattr(args, "show_counts", False) and opts.hive:
            print_counts(spark, opts.tables.database, config.log.format == "json")
    finally:
        spark.stop()
    if config.log.format == "json":  # every line on stdout is JSON too
        print(json.dumps({"event": "compaction_summary", "dry_run": opts.dry_run,
                          **summary.as_dict(opts.dry_run)}, default=str))
    else:
        for problem in summary.problems:
            print(f"left alone: {problem}")
        print(summary.line(opts.dry_run))
    return 1 if summary.problems else 0


def counted(summary: Summary, early: Recovered) -> Summary:
    """``summary`` with the swaps recovered before Spark started counted in."""
    summary.rolled_forward += early.rolled_forward
    summary.rolled_back += early.rolled_back
    return summary


def print_counts(spark: Any, database: str, as_json: bool = False) -> None:
    """Rows per table and day, as a reader of the Hive tables sees them (Spark SQL); one
    JSON object per line when ``as_json``."""
    if not as_json:
        print(f"{'table':<40} {'day':<10} {'rows':>10}")
    for row in spark.sql(f"SHOW TABLES IN `{database}`").collect():
        table = f"`{database}`.`{row.tableName}`"
        counts = spark.sql(f"SELECT day, count(*) AS n FROM {table} GROUP BY day ORDER BY day")
        for c in counts.collect():
            name = f"{database}.{row.tableName}"
            print(json.dumps({"event": "table_rows", "table": name, "day": c.day,
                              "rows": c.n}) if as_json else f"{name:<40} {c.day:<10} {c.n:>10}")
