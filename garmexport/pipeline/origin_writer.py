"""The writer of one origin in one partition: decode, skip, buffer per chain, publish.

An executor thread runs it, one message at a time, in the jobs its writer actor starts
(:mod:`garmexport.actors.writer_actor`, which also decides which messages reach it). Per
batch: decode the frames of the
origin's type in one go (native decoder), send records that fail to decode or were routed
as bad to the quarantine chain of the Kafka day, drop what the resume state says is
already published, and append the rest to the open file of its (kind, day) chain. Files
that reach a limit are published through :mod:`garmexport.pipeline.publisher`.

Storage failures do not lose or reorder anything: a file whose publish failed stays open
(so W stays below it) and is retried after a back-off; the report tells the reader to
pause its partitions meanwhile. When the attempts run out, StoreGaveUp ("gave up after N
attempts on publish <path>: <reason>") escapes and the process exits non-zero. A publish conflict means another owner committed first: the
writer forgets everything open and reports the fence.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from garmexport.wire import columns, fs_paths
from garmexport.pipeline import held_rows
from garmexport.protocol.commit_steps import PUBLISH
from garmexport.settings.config import Config
from garmexport.pipeline.crash_points import ENCODED, crash_at, crash_point
from garmexport.protocol.backoff import Backoff
from garmexport.errors import PublishConflict, StorageError, StoreGaveUp
from garmexport.wire.events import by_output
from garmexport.protocol.flush import FlushLimits
from garmexport.pipeline.messages import (
    Batch, DropOpen, FlushOpen, Published, ResetWriter, Tick, WriterMessage, WriterReport,
)
from garmexport.protocol.naming import (
    DATA, FRAME_ORIGIN, QUARANTINE, FileName, IntentName, chain_path, day_name,
    quarantine_day,
)
from garmexport.protocol.open_files import OpenFiles
from garmexport.pipeline.parquet_io import FileFacts, to_parquet_bytes
from garmexport.pipeline.publisher import publish_file
from garmexport.wire.quarantine import quarantine_table
from garmexport.protocol.resume import OriginState
from garmexport.storage.base import Storage


class OriginWriter:
    def __init__(
        self, config: Config, storage: Storage, origin: str, partition: int,
        clock: Callable[[], float] = time.monotonic, backoff: Backoff | None = None,
    ) -> None:
        self._cfg = config
        self._storage = storage
        self._origin = origin
        self._partition = partition
        self._clock = clock
        self._type = None if origin == FRAME_ORIGIN else by_output(origin)
        #: FsEvent paths the JVM exporter's way (``[jvm] fs_paths``), only for ``fs`` rows
        self._jvm_fs_paths = config.jvm.fs_paths and origin == "fs"
        w = config.writer
        self._limits = FlushLimits(w.max_file_rows, w.max_file_bytes, w.max_file_age_s)
        self.epoch = -1
        self._files = OpenFiles(OriginState(-1, {}))
        self._upto = -1
        st = config.storage
        self._retries = Backoff(st.retry_initial_s, st.retry_max_s)  # this writer's publishes
        # the exporter passes the one back-off of its store to every writer; alone, a
        # writer has its own
        self._backoff = backoff if backoff is not None else Backoff(st.retry_initial_s,
                                                                    st.retry_max_s)
        self._deferred = False
        self._halted = False
        self._error = ""
        self._day_names: dict[int, str] = {}
        self._reset_counts()

    def _reset_counts(self) -> None:
        self._published: list[Published] = []
        self._rows_in = 0
        self._skipped = 0
        self._quarantined: dict[str, int] = {}
        self._fenced: str | None = None
        self._handled = 0
        self._attempts_failed = 0
        self._attempts_retried = 0

    def reset(self, epoch: int, state: OriginState, upto: int) -> None:
        self.epoch = epoch
        self._halted = False
        self._files = OpenFiles(state)
        self._upto = upto
        self._retries.succeeded()

    # --- handling -------------------------------------------------------------------
    def handle(self, msg: WriterMessage) -> WriterReport | None:
        """Act on one message from the reader; return the report to send back, if any.

        ResetWriter starts a new epoch; DropOpen forgets every open file. Which messages
        reach a writer is the writer actor's order's rule, applied there once
        (:mod:`garmexport.pipeline.writer_order`: none of a past epoch, none after a
        DropOpen until the next reset); this method runs what it is given.
        """
        if isinstance(msg, ResetWriter):
            self.reset(msg.epoch, msg.state, msg.state.low)
            return None
        if isinstance(msg, Batch):
            return self.handle_batch(msg)
        if isinstance(msg, Tick):
            return self.tick()
        if isinstance(msg, FlushOpen):
            return self.flush(msg.count)
        if isinstance(msg, DropOpen):
            self.drop()
            self.epoch = -1
            return None
        raise TypeError(f"not a writer message: {type(msg).__name__}")

    def handle_batch(self, batch: Batch) -> WriterReport:
        self._handled = 1
        if self._halted:
            # fenced: its chains lost their open files, so any later row would open a file
            # out of sequence (a name that fences nothing) -- nothing until the reset
            return self.report()
        now = self._clock()
        n = len(batch.offsets)
        self._rows_in += n
        bad = {i: (reason, detail, key) for i, reason, detail, key in batch.bad}
        if self._type is not None and len(bad) < n:
            self._decode(batch, bad, now)
        if bad and not self._halted:
            self._add_quarantine(batch, sorted(bad.items()), now)
        if self._halted:
            return self.report()
        self._upto = max(self._upto, batch.upto)
        self.flush_due(now)
        return self.report()

    def _decode(self, batch: Batch, bad: dict[int, tuple], now: float) -> None:
        """Decode the records not known bad, add the rows to their days' open files, and
        the records that fail to decode to ``bad``.

        Records are decoded in (day, offset) order, so that each day's rows are one slice of
        the table: a stable sort of record indexes (numpy) is far cheaper than reordering
        the decoded table.
        """
        days = np.asarray(batch.days, np.int64)  # the router's array: no copy
        rows = None if not bad else np.delete(np.arange(len(days)), list(bad))
        if days.size and days.min() != days.max():
            rows = (np.argsort(days, kind="stable") if rows is None
                    else rows[np.argsort(days[rows], kind="stable")])
        table, failures = columns.decode_batch(self._type, batch.values, self._partition,
                                               np.asarray(batch.offsets, np.int64), order=rows)
        if self._jvm_fs_paths:
            table = fs_paths.jvm_style(table)
        if failures:
            at = np.fromiter((j for j, _ in failures), np.int64, len(failures))
            failed = at if rows is None else rows[at]
            for i, (_, failure) in zip(failed.tolist(), failures):
                bad[i] = (failure.reason.value, failure.detail, None)
            rows = np.delete(np.arange(len(days)) if rows is None else rows, at)
        self._add_data(table, days if rows is None else days[rows], now)

    def _day(self, day_number: int) -> str:
        name = self._day_names.get(day_number)
        if name is None:
            name = self._day_names[day_number] = day_name(day_number)
        return name

    def _add_data(self, table: pa.Table, days: np.ndarray, now: float) -> None:
        """Append decoded rows to the open file of their day's chain, skipping published ones.

        ``days[j]`` is the day number of row ``j`` of ``table``. Days do not decrease along
        the table and rows of a day are in offset order, so each day is one zero-copy slice.
        """
        n = table.num_rows
        if n == 0:
            return
        offsets = table.column("kafka_offset").to_numpy()
        cuts = [0, *(np.flatnonzero(days[1:] != days[:-1]) + 1).tolist(), n]
        for start, end in zip(cuts, cuts[1:]):
            day = self._day(int(days[start]))
            part = table.slice(start, end - start)
            bound = self._files.state.skip_bound(DATA, day)
            if offsets[start] <= bound:
                before = part.num_rows
                part = part.filter(pc.greater(part.column("kafka_offset"), bound))
                self._skipped += before - part.num_rows
            self._append(DATA, day, part, now)
            if self._halted:
                return

    def _append(self, kind: str, day: str, part: pa.Table, now: float) -> None:
        """Append rows (offset order) to the chain's open file; a file never holds more than
        max_file_rows rows: a full file is published before the rest goes into the next."""
        max_rows = self._limits.max_file_rows
        while part.num_rows:
            key = (kind, day)
            room = max_rows - (self._files.get(key).rows if key in self._files else 0)
            piece, part = part.slice(0, room), part.slice(room)
            offs = piece.column("kafka_offset")
            nbytes = piece.nbytes
            kept = held_rows.keep(piece, nbytes)
            self._files.add(kind, day, kept, offs[0].as_py(), offs[-1].as_py(),
                            piece.num_rows, nbytes, now, held_rows.held_bytes(kept, nbytes))
            if part.num_rows:
                self._publish([key], now, force=True)
                if self._halted:
                    return  # fenced: everything open was dropped; the partition resyncs
                if key in self._files:  # not published: the store is failing
                    max_rows = 2**62  # keep the rest in the same file until it can go

    def _add_quarantine(self, batch: Batch, bad: list, now: float) -> None:
        # the bad records' offsets and Kafka times as Python ints, one step per column
        at = [i for i, _ in bad]
        offsets = np.asarray(batch.offsets, np.int64)[at].tolist()
        kafka_ts = np.asarray(batch.kafka_ts, np.int64)[at].tolist()
        by_day: dict[str, list] = {}
        for (i, (reason, detail, key)), offset, kts in zip(bad, offsets, kafka_ts):
            kday = self._day(quarantine_day(kts))
            if offset <= self._files.state.skip_bound(QUARANTINE, kday):
                self._skipped += 1  # quarantined before a restart: counted then
                continue
            self._quarantined[reason] = self._quarantined.get(reason, 0) + 1
            by_day.setdefault(kday, []).append((i, reason, detail, key, offset, kts))
        for day, rows in by_day.items():
            table = quarantine_table(
                self._cfg.source.topic, self._partition, self._origin,
                [r[4] for r in rows], [r[5] for r in rows],
                [r[3] for r in rows], [batch.values[r[0]] for r in rows],
                [r[1] for r in rows], [r[2] for r in rows],
            )
            self._append(QUARANTINE, day, table, now)
            if self._halted:
                return

    # --- flushing ---------------------------------------------------------------------
    def flush_due(self, now: float) -> None:
        self._publish(self._files.due(self._limits, now), now)

    def flush(self, count: int = 0) -> WriterReport:
        keys = self._files.keys()
        self._publish(keys if count <= 0 else keys[:count], self._clock(), force=True)
        return self.report()

    def tick(self) -> WriterReport:
        self.flush_due(self._clock())
        return self.report()

    def drop(self) -> int:
        return self._files.drop_all()

    def _publish(self, keys: list, now: float, force: bool = False) -> None:
        self._deferred = bool(keys) and not force and self._backoff.waiting(now)
        if not keys or self._deferred or (self._retries.waiting(now) and not force):
            return
        for key in keys:
            f = self._files.get(key)
            started = time.monotonic()
            tables = held_rows.tables(f.pieces)
            try:
                path, nbytes, intent = self._publish_one(f, tables)
                crash_point(PUBLISH)
            except PublishConflict as conflict:
                self._fenced = conflict.path
                self._halted = True
                self._files.drop_all()
                return
            except StorageError as exc:
                self._attempts_failed += 1
                self._error = f"{type(exc).__name__}: {exc}"
                attempts = self._retries.failed(now)
                if attempts >= self._cfg.storage.retry_attempts:
                    name, intent = self._names(f)
                    raise StoreGaveUp(attempts, "publish",
                                      chain_path(intent.origin, intent.kind, intent.day, name),
                                      self._error) from exc
                self._attempts_retried += 1
                self._backoff.failed(self._clock())
                return
            self._retries.succeeded()
            self._backoff.succeeded()
            self._files.published(key)
            last_ms = max(pc.max(t.column("timestamp")).as_py() or 0 for t in tables) if f.kind == DATA else 0
            self._published.append(Published(
                f.kind, f.day, f.first_offset, f.last_offset, f.rows, nbytes, path, intent,
                time.monotonic() - started, last_ms or 0,
            ))

    def _names(self, f) -> tuple[FileName, IntentName]:  # noqa: ANN001 - OpenFile
        src = self._cfg.source
        return (FileName(src.cluster, src.topic, self._partition, f.first_offset,
                         self._origin if f.kind == QUARANTINE else None),
                IntentName(self._origin, f.kind, f.day, f.first_offset))

    def _publish_one(self, f, tables: list[pa.Table]) -> tuple[str, int, IntentName]:  # noqa: ANN001 - OpenFile
        src = self._cfg.source
        name, intent = self._names(f)
        facts = FileFacts(src.cluster, src.topic, self._partition, f.first_offset, f.last_offset, f.rows)
        data = to_parquet_bytes(tables, facts, self._cfg.output.compression)
        crash_at(ENCODED)  # TEST ONLY: encoded (off the reader's thread), nothing written
        return publish_file(self._storage, name, intent, data), len(data), intent

    # --- reporting --------------------------------------------------------------------
    def report(self) -> WriterReport:
        infos = self._files.infos()
        report = WriterReport(
            origin=self._origin, partition=self._partition, epoch=self.epoch,
            handled=self._handled, upto=self._upto, open_first=self._files.open_first(),
            published=tuple(self._published), buffered_bytes=self._files.buffered_bytes,
            open_files=len(infos),
            oldest_open_s=min((i.opened_at_s for i in infos), default=None),
            store_failing=self._retries.failures > 0 or self._deferred, fenced_path=self._fenced,
            rows_in=self._rows_in, quarantined=tuple(sorted(self._quarantined.items())),
            skipped=self._skipped,
            store_error=(self._error if self._retries.failures else
                         "waiting: another writer's publish to the store failed"
                         if self._deferred else ""),
            storage_failures=self._attempts_failed, storage_retries=self._attempts_retried,
        )
        self._reset_counts()
        return report
