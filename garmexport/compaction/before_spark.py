"""Finish the swaps a crashed run left before Spark starts: recovery in seconds.

Why: everything a swap does after its commit point is file renames, copies and deletes
plus two metastore location changes (:mod:`.swap`); none of it needs Spark. A retried
``compact`` used to build its Spark session first (5-7 s on a quiet machine, about a
minute on a loaded one) and then reach the metastore through Spark's Hive client (tens of
seconds for its first call under load) before it finished the swap, so path readers saw
rows twice, and ``_COMPLETE`` stayed away, for that long. Here the same roll-forward
(:func:`.recover.recover_all`) runs with plain file calls and one thrift
``alter_partition`` per flip (:meth:`garmexport.hive.metastore.Metastore.locate`).

When: there is a journal, and every journal with a metastore view can be flipped (Hive on
and ``hive.metastore_uri`` set; an embedded Derby metastore is only reachable through
Spark). Otherwise nothing is done and the Spark run recovers as before. The files are
reached as the exporter reaches them, without Hadoop's client: a local root directly
(:class:`.fs.LocalFs`), any other through the exporter's backend for ``output.root``
(WebHDFS, S3: :class:`.store_fs.StoreFs`), the same files the Spark run reaches as
``hdfs://`` or ``s3a://``; locations are given to the metastore as the Spark run gives
them.

Invariants: the root's lease (:mod:`.lease`) is held around every change, exactly as in
:func:`.job.run`, so a concurrent run never races the roll-forward, and released at the
end so that the Spark run takes it at once; every step is the idempotent one of
:func:`.swap.roll_forward`, so a crash here leaves what a crash in the Spark run would; a
failure of the store or the metastore is logged and left to the Spark run, which makes the
same steps again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from garmexport.compaction.fs import FileOps, LocalFs
from garmexport.compaction.lease import Lease
from garmexport.compaction.recover import Locator, Recovered, committed, recover_all
from garmexport.compaction.store_fs import StoreFs
from garmexport.errors import MetastoreError, StorageError
from garmexport.hive.metastore import Metastore
from garmexport.hive.tables import TableNaming
from garmexport.observe.logs import log_event
from garmexport.storage.open import open_storage
from garmexport.storage.options import StorageOptions

log = logging.getLogger(__name__)

NOTHING = Recovered(0, 0)


def _no_crash(step: str) -> None:
    pass


def plain_fs(root_uri: str, output_root: str, options: StorageOptions | None = None
             ) -> FileOps:
    """FileOps without Spark on the root Spark knows as ``root_uri`` and the exporter as
    ``output_root``: reached as the exporter reaches it, named as Spark names it."""
    local = "://" not in output_root or output_root.startswith("file://")
    if local and root_uri.startswith("file://"):
        return LocalFs(root_uri[len("file://"):])
    return StoreFs(open_storage(output_root, "compact", options, create=False), root_uri)


def thrift_locator(ms: Metastore, fs: FileOps, tables: TableNaming) -> Locator:
    """The swap's flips through ``ms``: the same table names and location URIs as the
    Spark run's (:func:`.job.locator_of`)."""
    def locate(output: str, day: str, path: str) -> None:
        ms.locate(tables.database, tables.table(output), day, f"{fs.uri}/{path}")
    return locate


def finish_swaps(root_uri: str, output_root: str, options: StorageOptions | None,
                 metastore_uri: str, timeout_s: float, tables: TableNaming,
                 lease_wait_s: float, now_ms: int, grace_s: float = 0.0,
                 crash: Callable[[str], None] | None = None) -> Recovered:
    """Roll every journaled swap under the root forward, if it can be done without Spark
    (see the module docstring); what was recovered (nothing when it was left to Spark).

    ``metastore_uri`` is empty when Hive is off or the metastore is Spark's embedded one.
    A swap whose grace has not passed is taken to its view, with the partition on the day
    directory (:class:`.swap.Hold`), and left to the Spark run, whose wait flips it and
    sweeps the view (:func:`.grace.wait_out`): flipped here, it would stay on a view that
    nothing sweeps while Spark starts. ``crash``: the tests' hooks at the swap steps.
    """
    fs = plain_fs(root_uri, output_root, options)
    try:
        return _finish(fs, metastore_uri, timeout_s, tables, lease_wait_s, now_ms, grace_s,
                       crash)
    except StorageError as exc:
        log_event(log, "compaction_recovery_left_to_spark", level=logging.WARNING,
                  reason=str(exc))
        return NOTHING
    finally:
        close = getattr(fs, "close", None)
        if close is not None:
            close()


def _finish(fs: FileOps, metastore_uri: str, timeout_s: float, tables: TableNaming,
            lease_wait_s: float, now_ms: int, grace_s: float,
            crash: Callable[[str], None] | None) -> Recovered:
    journals = committed(fs)
    if not journals:
        return NOTHING
    if any(j.view for j in journals) and not metastore_uri:
        log_event(log, "compaction_recovery_left_to_spark", journals=len(journals),
                  reason="the metastore flips need Spark's embedded metastore")
        return NOTHING
    started = time.monotonic()
    ms = Metastore(metastore_uri, timeout_s) if metastore_uri else None
    try:
        with Lease(fs).hold(lease_wait_s):
            done = recover_all(fs, thrift_locator(ms, fs, tables) if ms else None, now_ms,
                               grace_s, crash=crash or _no_crash)
    except MetastoreError as exc:
        log_event(log, "compaction_recovery_left_to_spark", level=logging.WARNING,
                  journals=len(journals), reason=str(exc))
        return NOTHING
    finally:
        if ms is not None:
            ms.close()
    log_event(log, "compaction_recovered_before_spark", rolled_forward=done.rolled_forward,
              rolled_back=done.rolled_back, waiting=len(done.waiting),
              seconds=round(time.monotonic() - started, 3))
    return done
