"""The one configuration object of garmexport: frozen, typed, built once at start.

Layers, later wins: the defaults embedded here (the shipped ``config/garmexport.toml``
repeats them with comments; a test keeps both equal), then one TOML file, then environment
variables ``GARMEXPORT_<SECTION>_<KEY>`` (for Marathon). Parsing, checking and printing
live in :mod:`garmexport.settings.load` (``load_config``, ``describe``); this module only
declares what exists.

Invariants:

- Units are in field names (``_s`` seconds, ``_bytes``, ``_days``); no field is read in
  one unit here and another elsewhere.
- ``[kafka]`` is passed to librdkafka untouched (a string-keyed dict of scalars); garmexport
  only sets ``group.id`` from ``source.group_id``.
- Secrets (any key naming a password, secret, token or credential, private keys, the OAuth
  config) never appear in ``repr``, ``config_load.describe`` or error messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from garmexport.protocol.naming import LABEL_PATTERN
from garmexport.process.usable_cpus import usable_cpus

MiB = 1024 * 1024
DAY_S = 24 * 3600

_SECRET_WORDS = ("password", "secret", "token", "credential", "access_key")
_SECRET_KEYS = frozenset({"ssl.key.pem", "sasl.oauthbearer.config"})
MASK = "***"


def is_secret(key: str) -> bool:
    """True if the value under ``key`` (any section, any spelling) must never be shown."""
    k = key.lower().replace("_", ".")
    return k in _SECRET_KEYS or any(w.replace("_", ".") in k for w in _SECRET_WORDS)


def shown(key: str, value: object) -> object:
    """``value`` as it may appear in logs: masked if ``key`` is a secret and it is set."""
    return MASK if is_secret(key) and value not in ("", None) else value


def _f(default: Any, doc: str, *, min: float | None = None, max: float | None = None,
       choices: tuple[str, ...] = (), pattern: str | None = None, fold_case: bool = False) -> Any:
    """A config field: its default, a one-line doc (README), and the checks on its value.
    ``fold_case``: a choice may be written in any case (it is stored as in ``choices``)."""
    return dataclasses.field(default=default, metadata={
        "doc": doc, "min": min, "max": max, "choices": choices, "pattern": pattern,
        "fold_case": fold_case})


_NAME = LABEL_PATTERN  # Kafka's topic alphabet: safe inside file names joined by '+'


class _Section:
    """Shared ``repr`` with secrets masked, for the frozen section dataclasses."""

    def __repr__(self) -> str:
        body = ", ".join(f"{f.name}={shown(f.name, getattr(self, f.name))!r}"
                         for f in dataclasses.fields(self))  # type: ignore[arg-type]
        return f"{type(self).__name__}({body})"


@dataclasses.dataclass(frozen=True, repr=False)
class SourceConfig(_Section):
    topic: str = _f("garmadon", "Kafka topic to export", pattern=_NAME)
    cluster: str = _f("local", "label of the Kafka cluster, part of every output file name",
                      pattern=_NAME)
    group_id: str = _f("garmexport", "Kafka consumer group (becomes librdkafka group.id)",
                       pattern=r".+")
    start: str = _f("earliest", "where a partition with no marker yet starts on the first run",
                    choices=("earliest", "latest"))
    poll_max_records: int = _f(20_000, "records taken from Kafka per poll (was "
                               "writer.batch_max_records)", min=1)
    poll_timeout_s: float = _f(0.5, "seconds one Kafka poll may block (was "
                               "writer.poll_timeout_s)", min=0)


@dataclasses.dataclass(frozen=True, repr=False)
class OutputConfig(_Section):
    root: str = _f("./garmexport-output",
                   "output root: a local path, or an hdfs://, webhdfs:// or s3:// URI",
                   pattern=r".+")
    compression: str = _f("zstd", "Parquet codec of exported files",
                          choices=("zstd", "snappy", "gzip", "lz4", "brotli", "none"))
    s3_endpoint_url: str = _f("", "S3 endpoint (empty: the AWS default)")
    s3_region: str = _f("us-east-1", "S3 region")
    s3_access_key_id: str = _f("", "S3 access key id (masked in logs)")
    s3_secret_access_key: str = _f("", "S3 secret access key (masked in logs)")
    s3_addressing_style: str = _f("path", "how requests name the bucket: in the path, as a "
                                  "virtual host, or botocore's choice",
                                  choices=("path", "virtual", "auto"))
    s3_attempts: int = _f(3, "attempts of one S3 call (botocore's standard retries) before the "
                          "failure goes to the exporter's back-off ([storage])", min=1)
    s3_timeout_s: float = _f(60.0, "connect and read timeout of one S3 call", min=0.1)
    hdfs_user: str = _f("", "user for WebHDFS requests (empty: the process user)")
    hdfs_http_port: int = _f(9870, "WebHDFS HTTP port of the NameNodes of an hdfs:// root "
                             "(a webhdfs:// root names its ports)", min=1, max=65535)
    hdfs_timeout_s: float = _f(30.0, "socket timeout of one WebHDFS request (to connect, and "
                               "between bytes of the answer)", min=0.1)
    hdfs_attempts: int = _f(3, "attempts of one idempotent WebHDFS request before the failure "
                            "goes to the exporter's back-off ([storage])", min=1)
    hdfs_retry_initial_s: float = _f(0.1, "first pause between the attempts of one WebHDFS "
                                     "request", min=0)
    hdfs_retry_max_s: float = _f(1.0, "longest pause between the attempts of one WebHDFS "
                                 "request", min=0)
    hdfs_ca_file: str = _f("", "PEM file of the CA certificates an swebhdfs:// root's NameNodes "
                           "and DataNodes are checked against (empty: REQUESTS_CA_BUNDLE if "
                           "set, else the certifi bundle requests ships)")
    hdfs_kerberos: bool = _f(False, "authenticate to WebHDFS with Kerberos (SPNEGO; needs the "
                             "kerberos extra); hdfs_user then names a proxy user (doas)")
    hdfs_kerberos_principal: str = _f("", "Kerberos principal (needed with a keytab; empty: "
                                      "the ticket cache's own)")
    hdfs_kerberos_keytab: str = _f("", "keytab garmexport gets and renews its tickets from "
                                   "(kinit -kt); empty: use a ticket cache kept by kinit or "
                                   "k5start, renewed with kinit -R")
    hdfs_kerberos_ccache: str = _f("", "ticket cache (empty: a private one with a keytab, else "
                                   "the default, KRB5CCNAME)")
    hdfs_kerberos_renew_s: float = _f(3600.0, "seconds between ticket renewals (sooner once 80 % "
                                      "of a ticket's lifetime has passed)", min=1)


@dataclasses.dataclass(frozen=True, repr=False)
class WriterConfig(_Section):
    max_file_rows: int = _f(1_000_000, "rows after which an open file is committed", min=1)
    max_file_bytes: int = _f(128 * MiB, "bytes after which an open file is committed", min=1)
    max_file_age_s: float = _f(60.0, "seconds after which an open file is committed", min=0)
    max_open_files: int = _f(2000, "open files per process; the oldest is committed beyond",
                             min=1)
    max_buffered_bytes: int = _f(128 * MiB, "memory for events held (open files, as they "
                                 "cost, and records gathered for the writers) before the "
                                 "oldest files are committed", min=1)
    idle_flush_s: float = _f(0.25, "after a burst of at least decode_batch_records records, a "
                             "partition quiet for this long has its open files published "
                             "(0: only the age, row and size limits)",
                             min=0)
    decode_batch_records: int = _f(8192, "records of one type the reader gathers before handing "
                                   "them to the writer (larger batches decode faster)", min=1)
    # 1 s, not 0.25: each batch has a fixed cost (a decode of a small batch is mostly
    # that, plus its messages and report); 72 writers sending by age 4 times a second made
    # a catch-up 10 % slower (DESIGN.md 9.7)
    decode_batch_wait_s: float = _f(1.0, "longest the reader holds a smaller batch back",
                                    min=0)


@dataclasses.dataclass(frozen=True, repr=False)
class ProtocolConfig(_Section):
    heartbeat_interval_s: float = _f(10.0, "seconds after which a partition's marker is "
                                     "rewritten when its watermarks moved but no file was "
                                     "published (a rare type must not hold the restart "
                                     "position back)", min=0)
    marker_keep: int = _f(1, "markers kept per partition after a marker is written, the "
                          "new one included; older markers it makes redundant are deleted",
                          min=1)
    event_time_past_days: float = _f(30.0, "events whose time is more than this many days "
                                     "before their Kafka timestamp are out of window", min=0)
    event_time_future_s: float = _f(3600.0, "events whose time is more than this many seconds "
                                    "after their Kafka timestamp are out of window", min=0)
    out_of_window: str = _f("quarantine", "what happens to an out-of-window event",
                            choices=("quarantine", "clamp"))
    shutdown_timeout_s: float = _f(30.0, "seconds a clean shutdown may take", min=0)


@dataclasses.dataclass(frozen=True, repr=False)
class StorageConfig(_Section):
    retry_initial_s: float = _f(0.5, "first back-off after a failed store operation", min=0)
    # 5 s, not more: the store is retried at most this long after it comes back, and a
    # recovery that waits out a 30 s back-off after a 20 s outage was seen taking 27 s;
    # 100 attempts keep the give-up near 8 minutes, as 20 attempts with 30 s did
    retry_max_s: float = _f(5.0, "longest back-off between retries", min=0)
    retry_attempts: int = _f(100, "attempts before the process gives up and exits", min=1)


@dataclasses.dataclass(frozen=True, repr=False)
class ActorsConfig(_Section):
    # Only the in-process base: the multi-process ones start one OS process per writer
    # actor (72 for 4 partitions); measured here they took ~10 GB and stalled. Scale by
    # running more instances in the consumer group (README, "Actors and scaling").
    system_base: str = _f("simpleSystemBase", "thespian system base (only simpleSystemBase: "
                          "see README, Actors and scaling)", choices=("simpleSystemBase",))
    cores: int = _f(0, "threads that run the writers' work (decode, Parquet encoding, "
                    "publishing) beside the reader's thread; shared out among the readers "
                    "of actors.parallelism, each getting one more than its share (never "
                    "more than cores); 0: the CPUs this process may use (its affinity, "
                    "capped by its cgroup CPU quota)", min=0, max=256)

    parallelism: int = _f(0, "readers of this instance, each its own process with its own "
                          "consumer in the group (1: one process, no supervisor); 0: the "
                          "CPUs this process may use. writer.max_buffered_bytes, "
                          "writer.max_open_files and librdkafka's pre-fetch are shared out "
                          "among them, and so is actors.cores (one thread more per reader)", min=0, max=64)

    def worker_threads(self) -> int:
        """``cores``, or the CPUs this process may use when it is 0."""
        return self.cores or usable_cpus()

    def readers(self) -> int:
        """``parallelism``, or the CPUs this process may use when it is 0."""
        return self.parallelism or usable_cpus()


@dataclasses.dataclass(frozen=True, repr=False)
class MetricsConfig(_Section):
    port: int = _f(9108, "HTTP port of /metrics and the health endpoints (0: any free port)",
                   min=0, max=65535)
    host: str = _f("0.0.0.0", "address the metrics server binds", pattern=r".+")
    port_file: str = _f("", "file the bound port is written to once the server listens "
                        "(useful with port 0; empty: none)")
    live_timeout_s: float = _f(30.0, "seconds without progress before /health/live answers "
                               "503: the main loop not ticking, the store failing, one "
                               "writer message running, or (reader processes) a reader not "
                               "answering; 10 x source.poll_timeout_s if that is longer",
                               min=1.0)


@dataclasses.dataclass(frozen=True, repr=False)
class CompactionConfig(_Section):
    lateness_s: float = _f(2.0 * DAY_S, "a UTC day is compacted once it ended this many "
                           "seconds ago", min=0)
    target_file_bytes: int = _f(256 * MiB, "size compacted files aim at", min=1)
    sort_columns: tuple[str, ...] = _f(("application_id", "container_id", "timestamp"),
                                       "columns compacted files are sorted by")
    codec: str = _f("zstd", "Parquet codec of compacted files",
                    choices=("zstd", "snappy", "gzip", "lz4", "none"))
    spark_master: str = _f("local[2]", "Spark master URL", pattern=r".+")
    pushgateway_url: str = _f("", "Prometheus Pushgateway (http://host:9091) each run pushes "
                              "its outcome to, job garmexport_compaction (empty: none)")
    metrics_textfile: str = _f("", "file each run writes its outcome to in the Prometheus text "
                               "format, for node_exporter's textfile collector (empty: none)")
    spark_log_level: str = _f("ERROR", "lowest level of the Spark JVM's log records (and "
                              "py4j's) that reach the log; WARN shows Spark's and Hive's "
                              "harmless warnings (any case)",
                              choices=("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"),
                              fold_case=True)
    hadoop_root: str = _f("", "output.root as Spark's Hadoop file system reads it (hdfs://, "
                          "s3a://, file:// URI); empty: derived from output.root, a "
                          "webhdfs://nn:9870/p root becoming hdfs://nn/p (RPC port 8020)",
                          pattern=r"(?:[A-Za-z][A-Za-z0-9+.-]*://.+)?")
    retired_grace_s: float = _f(3600.0, "the files a Hive query may have listed are kept "
                                "this long after the partition left them: compact waits "
                                "this long after flipping a day to its compacted view "
                                "before it changes the day directory, and deletes a view "
                                "this long after the flip back. Longer than any query "
                                "runs; 0 swaps at once", min=0)


@dataclasses.dataclass(frozen=True, repr=False)
class JvmConfig(_Section):
    # On by default: a root without JVM files costs one listing per type directory, once,
    # for a partition that has no marker yet; a root with them would otherwise be exported
    # again from the start of retention.
    takeover: bool = _f(True, "a partition with no marker yet resumes where the Garmadon JVM "
                        "HDFS exporter stopped in this root (README, Taking over from the "
                        "JVM exporter)")
    cluster: str = _f("", "the JVM exporter's kafka.cluster tag that is ours (its files "
                      "<p>.cluster=<tag>.index=<n>); empty: only untagged files count; files "
                      "of another tag never set our offsets", pattern=r"[A-Za-z0-9_-]*")
    # Off by default: on, the fs rows' values change, which existing garmexport users'
    # queries may not expect; a takeover from the JVM exporter turns it on explicitly.
    fs_paths: bool = _f(False, "write FsEvent uri without its port and src_path/dst_path "
                        "without the uri prefix, as the Garmadon JVM exporter does (README, "
                        "Taking over from the JVM exporter)")


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclasses.dataclass(frozen=True, repr=False)
class HiveConfig(_Section):
    metastore_uri: str = _f("", "thrift://host:port of the Hive metastore (empty: the exporter "
                            "registers nothing; compact uses an embedded Derby metastore)",
                            pattern=r"^$|^thrift://[^:/]+:[0-9]+/?$")
    database: str = _f("garmadon", "Hive database of the external tables", pattern=r"[A-Za-z0-9_]+")
    table_prefix: str = _f("", "prefix of every table name (table = prefix + dataset name)",
                           pattern=r"[A-Za-z0-9_]*")
    quarantine_table: str = _f("quarantine", "table of the _quarantine dataset (without the "
                               "prefix)", pattern=r"[A-Za-z0-9_]+")
    register_delay_s: float = _f(60.0, "the exporter gathers new (table, day) partitions this "
                                 "long, then registers them in one round", min=0)
    retry_max_s: float = _f(120.0, "longest back-off between registration attempts while the "
                            "metastore fails", min=0.1)
    timeout_s: float = _f(30.0, "socket timeout of one metastore call", min=0.1)


@dataclasses.dataclass(frozen=True, repr=False)
class LogConfig(_Section):
    format: str = _f("text", "log line format", choices=("text", "json"))
    level: str = _f("INFO", "log level (any case)", choices=_LEVELS, fold_case=True)
    actor_level: str = _f("WARNING", "log level of the actor library (thespian), whose DEBUG "
                          "lines print every actor message in full", choices=_LEVELS,
                          fold_case=True)


DEFAULT_KAFKA: Mapping[str, object] = {
    "bootstrap.servers": "127.0.0.1:9092",
    # librdkafka's 1000 ms default makes a consumer that falls behind wait a second per
    # fetch queue refill: it halved the throughput of the export pipeline here.
    "fetch.queue.backoff.ms": 10,
    # Progress lives in the output directory (markers), never in Kafka's group offsets.
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    # Only used when a seek lands outside retention: restart from what is still there.
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 10_000,
    "heartbeat.interval.ms": 1_000,
    # Eager: a revoke hands back every partition at once, so the exporter drops the open
    # files of all its writers in one step and re-derives every assignment from the output;
    # one rebalance round instead of cooperative-sticky's two.
    "partition.assignment.strategy": "range",
    # librdkafka's default is 64 MiB, held outside writer.max_buffered_bytes: with 8 MiB the
    # 1M catch-up of 2 readers peaks 90-120 MB lower at the same speed (DESIGN.md 9.10).
    "queued.max.messages.kbytes": 8_192,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 4_194_304,
}


class KafkaSettings(Mapping[str, object]):
    """librdkafka settings, read-only, with secrets masked in ``repr``."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, object]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> object:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, str(v)) for k, v in self._items.items())))

    def __repr__(self) -> str:
        return f"KafkaSettings({ {k: shown(k, v) for k, v in self._items.items()} !r})"


SECTIONS: Mapping[str, type] = {
    "source": SourceConfig, "output": OutputConfig, "writer": WriterConfig,
    "protocol": ProtocolConfig, "storage": StorageConfig, "actors": ActorsConfig,
    "metrics": MetricsConfig, "compaction": CompactionConfig, "hive": HiveConfig,
    "jvm": JvmConfig, "log": LogConfig,
}
KAFKA = "kafka"


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a garmexport process is told, checked. Build it with :func:`garmexport.settings.load.load_config`."""

    source: SourceConfig = dataclasses.field(default_factory=SourceConfig)
    kafka: KafkaSettings = dataclasses.field(default_factory=lambda: KafkaSettings(DEFAULT_KAFKA))
    output: OutputConfig = dataclasses.field(default_factory=OutputConfig)
    writer: WriterConfig = dataclasses.field(default_factory=WriterConfig)
    protocol: ProtocolConfig = dataclasses.field(default_factory=ProtocolConfig)
    storage: StorageConfig = dataclasses.field(default_factory=StorageConfig)
    actors: ActorsConfig = dataclasses.field(default_factory=ActorsConfig)
    metrics: MetricsConfig = dataclasses.field(default_factory=MetricsConfig)
    compaction: CompactionConfig = dataclasses.field(default_factory=CompactionConfig)
    hive: HiveConfig = dataclasses.field(default_factory=HiveConfig)
    jvm: JvmConfig = dataclasses.field(default_factory=JvmConfig)
    log: LogConfig = dataclasses.field(default_factory=LogConfig)
    #: where the values came from, for humans: "defaults", a file, "environment"
    origin: tuple[str, ...] = dataclasses.field(default=("defaults",), compare=False)
    #: old names that were read, each as (old key, new key, where): logged as warnings
    deprecated: tuple[tuple[str, str, str], ...] = dataclasses.field(default=(),
                                                                       compare=False)

    def live_timeout_s(self) -> float:
        """The one liveness threshold, of one process's loop and of an instance's silent
        reader alike: ``metrics.live_timeout_s``, or 10 polls if longer (a loop blocked in
        one poll for ``source.poll_timeout_s`` still ticks between polls)."""
        return max(self.metrics.live_timeout_s, 10 * self.source.poll_timeout_s)

    def consumer_settings(self) -> dict[str, object]:
        """A fresh librdkafka consumer dict: ``[kafka]`` plus ``group.id``. Contains secrets."""
        return {**self.kafka, "group.id": self.source.group_id}
