"""The one exception tree of garmexport.

::

    GarmexportError(Exception)
     +-- ConfigError(GarmexportError, ValueError)      bad configuration: names key and file
     +-- StorageError(GarmexportError, OSError)        a store operation failed (retryable)
     |    +-- PublishConflict(StorageError, FileExistsError)
     |    |                                            exclusive publish lost: the fence
     |    +-- StoreGaveUp(StorageError)                storage.retry_attempts failed in a row:
     |    |                                            the exporter stops (exit 1)
     |    +-- StorageDenied(StorageError, PermissionError)
     |                                                 the store refused this user (permissions):
     |                                                 retried while running, fatal at start-up
     +-- BrokerError(GarmexportError, ConnectionError) Kafka could not be reached or answered wrong
     +-- MetastoreError(GarmexportError, ConnectionError)
     |    |                                            a Hive metastore call failed (retried in the
     |    |                                            background; never stops the export)
     |    +-- TableMissing(MetastoreError, LookupError)
     |                                                 the table (or its database) is not there
     +-- LeaseLost(GarmexportError, RuntimeError)      another compaction holds the output root
     +-- ProtocolViolation(GarmexportError, RuntimeError)
                                                       an invariant of the commit protocol broke:
                                                       never caught, the process exits non-zero

Records that cannot be decoded are not exceptions: they are values
(:class:`garmexport.wire.frames.DecodeFailure`) that go to quarantine.
"""

from __future__ import annotations


class GarmexportError(Exception):
    """Base of every error garmexport raises on purpose."""


class ConfigError(GarmexportError, ValueError):
    """A configuration value is missing or wrong; the message names the key and the file."""


class StorageError(GarmexportError, OSError):
    """A storage operation failed; callers retry with back-off, then give up."""


class PublishConflict(StorageError, FileExistsError):
    """The final name of a publish already exists: another owner committed it first."""

    def __init__(self, path: str) -> None:
        super().__init__(f"publish conflict: {path} already exists")
        self.path = path


class StoreGaveUp(StorageError):
    """``attempts`` tries of one store operation failed in a row: the exporter stops."""

    def __init__(self, attempts: int, op: str, path: str, reason: str) -> None:
        super().__init__(
            f"gave up after {attempts} attempts on {op} {path}: {reason} "
            f"(storage.retry_attempts = {attempts}): make the store reachable and writable; "
            "the next start resumes from the output")


class StorageDenied(StorageError, PermissionError):
    """The store refused the call to this user (HDFS's AccessControlException). While the
    exporter runs it is retried like any failure (someone may be mending the permissions);
    at start-up, where the root is first written, it is a configuration error (exit 2)."""


class BrokerError(GarmexportError, ConnectionError):
    """The Kafka cluster could not be reached or gave an unusable answer."""


class MetastoreError(GarmexportError, ConnectionError):
    """A Hive metastore call failed; partition registration backs off and retries."""


class TableMissing(MetastoreError, LookupError):
    """The metastore has no such table (or database): dropped, or restored from an older
    backup. Registration forgets that it made the table and makes it again."""


class LeaseLost(GarmexportError, RuntimeError):
    """Another compaction run holds (or took over) the output root's lease; this run stops
    before its next commit and the holder finishes the work."""


class ProtocolViolation(GarmexportError, RuntimeError):
    """An invariant of the commit protocol does not hold; never retried."""
