"""The Hive metastore adapter: the few thrift calls registration needs, all idempotent.

Client library: the thrift bindings that ``pymetastore`` ships (generated from Hive's
``hive_metastore.thrift``) over the ``thrift`` runtime. Its high-level API is read-only, so
only the generated ``ThriftHiveMetastore.Client`` and ``ttypes`` are used. The calls here
(get/create database and table, alter_table, add_partitions_req, get_partition,
alter_partition) exist unchanged since Hive 0.13, so they work against the 2.3 metastore
that pip's pyspark ships and newer ones.

Besides registration, :meth:`Metastore.locate` makes compaction's partition flips
(:mod:`garmexport.compaction.swap`) without Spark, so that a retried run finishes a
crashed swap before its Spark session exists (:mod:`garmexport.compaction.before_spark`).

Every call raises :class:`garmexport.errors.MetastoreError` on any failure (connection,
timeout, a metastore exception): the caller backs off and retries the whole round, which
is safe because each step is idempotent (IF NOT EXISTS semantics; a table or partition that
another instance created first counts as done).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlparse

from garmexport.errors import ConfigError, MetastoreError, TableMissing
from garmexport.hive.tables import PARTITION_COLUMN
from garmexport.hive.thrift_logs import relay_thrift_logs

PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"


def parse_uri(uri: str) -> tuple[str, int]:
    """(host, port) of ``thrift://host:port``; ConfigError otherwise."""
    p = urlparse(uri)
    if p.scheme != "thrift" or not p.hostname or not p.port:
        raise ConfigError(f"hive.metastore_uri: expected thrift://host:port, not {uri!r}")
    return p.hostname, p.port


class Metastore:
    """One connection to a metastore; reconnects on the next call after a failure."""

    def __init__(self, uri: str, timeout_s: float) -> None:
        self._host, self._port = parse_uri(uri)
        relay_thrift_logs()  # a failed connection is expected here, not an ERROR line
        self._timeout_ms = int(timeout_s * 1000)
        self._transport = None
        self._client = None

    def _connect(self):  # noqa: ANN202 - generated client type
        if self._client is None:
            from pymetastore.hive_metastore import ThriftHiveMetastore
            from thrift.protocol import TBinaryProtocol
            from thrift.transport import TSocket, TTransport

            sock = TSocket.TSocket(self._host, self._port)
            sock.setTimeout(self._timeout_ms)
            transport = TTransport.TBufferedTransport(sock)
            transport.open()
            self._transport = transport
            self._client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        return self._client

    def close(self) -> None:
        if self._transport is not None:
            try:
                self._transport.close()
            finally:
                self._transport = self._client = None

    def _call(self, what: str, fn):  # noqa: ANN001, ANN202
        from pymetastore.hive_metastore import ttypes

        try:
            return fn(self._connect(), ttypes)
        except MetastoreError:
            raise
        except ttypes.AlreadyExistsException:
            return None  # another instance (or an earlier attempt) did it first
        except Exception as exc:  # noqa: BLE001 - thrift raises many unrelated types
            self.close()
            raise MetastoreError(f"metastore {what}: {type(exc).__name__}: {exc}") from exc

    def reach(self) -> None:
        """Raise MetastoreError unless the metastore answers (one cheap call)."""
        self._call("reach", lambda c, t: c.get_all_databases())

    def ensure_database(self, database: str) -> None:
        def run(c, t):  # noqa: ANN001, ANN202
            try:
                c.get_database(database)
            except t.NoSuchObjectException:
                c.create_database(t.Database(name=database, description="garmexport",
                                             parameters={}))
        self._call(f"database {database}", run)

    def columns(self, database: str, table: str) -> list[tuple[str, str]] | None:
        """(name, type) of the table's columns, or None if it does not exist."""
        def run(c, t):  # noqa: ANN001, ANN202
            try:
                tbl = c.get_table(database, table)
            except t.NoSuchObjectException:
                return None
            return [(f.name, f.type) for f in tbl.sd.cols]
        return self._call(f"get table {database}.{table}", run)

    def create_table(self, database: str, table: str, columns: Sequence[tuple[str, str]],
                     location: str) -> None:
        """An EXTERNAL Parquet table partitioned by ``day string``, as Spark's
        ``CREATE EXTERNAL TABLE .. STORED AS PARQUET`` makes it."""
        def run(c, t):  # noqa: ANN001, ANN202
            c.create_table(t.Table(
                tableName=table, dbName=database, owner="garmexport",
                sd=_storage(t, columns, location),
                partitionKeys=[t.FieldSchema(PARTITION_COLUMN, "string", None)],
                parameters={"EXTERNAL": "TRUE"}, tableType="EXTERNAL_TABLE"))
        self._call(f"create table {database}.{table}", run)

    def add_columns(self, database: str, table: str, columns: Sequence[tuple[str, str]]) -> None:
        def run(c, t):  # noqa: ANN001, ANN202
            tbl = c.get_table(database, table)
            known = {f.name.lower() for f in tbl.sd.cols}
            tbl.sd.cols = list(tbl.sd.cols) + [t.FieldSchema(n, ty, None) for n, ty in columns
                                               if n.lower() not in known]
            c.alter_table(database, table, tbl)
        self._call(f"add columns to {database}.{table}", run)

    def add_partitions(self, database: str, table: str, days: Sequence[tuple[str, str]]) -> None:
        """Add (day, location) partitions; those that exist already are left as they are.
        TableMissing when the table (or the database) does not exist."""
        def run(c, t):  # noqa: ANN001, ANN202
            try:
                tbl = c.get_table(database, table)
            except t.NoSuchObjectException as exc:
                raise TableMissing(f"metastore add partitions to {database}.{table}: "
                                   f"no such table: {exc}") from exc
            parts = [t.Partition(values=[day], dbName=database, tableName=table,
                                 sd=_storage(t, [(f.name, f.type) for f in tbl.sd.cols], loc),
                                 parameters={})
                     for day, loc in days]
            c.add_partitions_req(t.AddPartitionsRequest(database, table, parts,
                                                        ifNotExists=True, needResult=False))
        self._call(f"add partitions to {database}.{table}", run)

    def locate(self, database: str, table: str, day: str, location: str) -> bool:
        """Point the day's partition at ``location`` (one ``alter_partition`` call, made only
        when it points elsewhere), adding the partition there if missing; False (nothing
        done) when the table does not exist, as :func:`garmexport.compaction.hive.locate`.
        """
        def run(c, t):  # noqa: ANN001, ANN202
            try:
                tbl = c.get_table(database, table)
            except t.NoSuchObjectException:
                return False
            cols = [(f.name, f.type) for f in tbl.sd.cols]
            c.add_partitions_req(t.AddPartitionsRequest(
                database, table, [t.Partition(values=[day], dbName=database, tableName=table,
                                              sd=_storage(t, cols, location), parameters={})],
                ifNotExists=True, needResult=False))
            part = c.get_partition(database, table, [day])
            if part.sd.location != location:
                part.sd.location = location
                c.alter_partition(database, table, part)
            return True
        return bool(self._call(f"locate {database}.{table} day={day}", run))

    def partition_location(self, database: str, table: str, day: str) -> str | None:
        """Where the day's partition points, or None if it (or the table) does not exist."""
        def run(c, t):  # noqa: ANN001, ANN202
            try:
                return c.get_partition(database, table, [day]).sd.location
            except t.NoSuchObjectException:
                return None
        return self._call(f"get partition {database}.{table} day={day}", run)

    def partition_days(self, database: str, table: str) -> list[str]:
        """Days registered for the table (for tests and operators)."""
        def run(c, t):  # noqa: ANN001, ANN202
            return sorted(n.partition("=")[2] for n in c.get_partition_names(database, table, -1))
        return self._call(f"list partitions of {database}.{table}", run)


def _storage(t, columns: Sequence[tuple[str, str]], location: str):  # noqa: ANN001, ANN202
    return t.StorageDescriptor(
        cols=[t.FieldSchema(n, ty, None) for n, ty in columns], location=location,
        inputFormat=PARQUET_INPUT, outputFormat=PARQUET_OUTPUT, compressed=False,
        numBuckets=-1, serdeInfo=t.SerDeInfo(None, PARQUET_SERDE,
                                             {"serialization.format": "1"}),
        bucketCols=[], sortCols=[], parameters={})
