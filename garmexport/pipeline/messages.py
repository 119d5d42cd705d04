"""Every message the actors exchange: frozen dataclasses that pickle.

They hold plain values (numbers, strings, tuples), numpy arrays (a batch's offsets, Kafka
times and days) and small frozen values of the protocol (a writer's ``OriginState``), all
of which pickle, as thespian requires of messages (the in-process base passes them by
reference, which would hide a message that does not pickle). The start messages that hand
an actor live parts of its process once are elsewhere, with the parts they carry:
``StartExport`` and ``StartReader`` (the subscribed Kafka source, the forced stop's
snapshot) in :mod:`garmexport.actors.start_messages`, ``StartWriter`` (the store, back-off
and executor every writer shares) in :mod:`garmexport.pipeline.writer_start`. A batch of records
is one message; no message carries one event. Errors travel as traceback text, never as
exception objects.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

import numpy as np

from garmexport.protocol.naming import IntentName
from garmexport.protocol.resume import OriginState
from garmexport.errors import ConfigError, GarmexportError


# external caller <-> exporter (top actor); StartExport is in actors/start_messages.py
@dataclass(frozen=True)
class StopExport:
    """Commit what is open and stop; ``reason`` goes to the log."""

    reason: str


@dataclass(frozen=True)
class ExportStopped:
    exit_code: int
    reason: str


@dataclass(frozen=True)
class Failure:
    """Something unexpected happened in ``where``: the exporter stops, exit non-zero.

    ``error`` is the one line an operator reads; ``traceback`` the detail. ``foreseen``:
    an error garmexport raises on purpose (its message says what to do), whose traceback
    only matters at DEBUG."""

    where: str
    traceback: str
    error: str = ""
    foreseen: bool = False
    exit_code: int = 1

    @staticmethod
    def of(where: str, exc: BaseException) -> Failure:
        """The Failure of ``exc``, caught in ``where`` (call it in the ``except`` block)."""
        foreseen = isinstance(exc, GarmexportError)
        text = str(exc).strip().replace("\n", " ")
        return Failure(where, traceback.format_exc(),
                       text if foreseen else f"{type(exc).__name__}: {text}", foreseen,
                       2 if isinstance(exc, ConfigError) else 1)


# exporter -> reader; StartReader is in actors/start_messages.py

# reader -> writer (StartWriter, which carries live parts, is in pipeline.writer_start)
@dataclass(frozen=True)
class ResetWriter:
    """(Re)start the writer at its slice of the partition's resume state (its W and its
    chains' last published offsets), as recovery read it; batches of older epochs are void."""

    epoch: int
    state: OriginState


@dataclass(frozen=True, eq=False)
class Batch:
    """One poll's records of one origin in one partition, in offset order.

    ``offsets``, ``kafka_ts`` and ``days`` are int64 numpy arrays (they pickle), as the
    router made them: the writer decodes and splits them as arrays. A sequence of ints is
    taken too (tests build batches so).
    """

    epoch: int
    upto: int  # every record of the partition up to here had been routed when this left
    offsets: np.ndarray
    values: tuple[bytes | None, ...]
    kafka_ts: np.ndarray
    days: np.ndarray  # day number of the chain each record belongs to
    bad: tuple[tuple[int, str, str, bytes | None], ...]  # (index, reason, detail, key)
    nbytes: int  # bytes of the values, as the reader's memory budget counts them

    def __eq__(self, other: object) -> bool:
        # field by field, the arrays by value: an array's ``==`` is an array, not a truth
        if not isinstance(other, Batch):
            return NotImplemented
        return ((self.epoch, self.upto, self.values, self.bad, self.nbytes)
                == (other.epoch, other.upto, other.values, other.bad, other.nbytes)
                and all(np.array_equal(a, b) for a, b in ((self.offsets, other.offsets),
                                                           (self.kafka_ts, other.kafka_ts),
                                                           (self.days, other.days))))


@dataclass(frozen=True)
class Tick:
    """Timer: flush files past their age, retry a failed publish when its back-off is over."""

    epoch: int


@dataclass(frozen=True)
class FlushOpen:
    """Publish open files: ``count`` oldest ones, or all when ``count`` is 0."""

    epoch: int
    count: int = 0


@dataclass(frozen=True)
class DropOpen:
    """Forget every open file (partition revoked or fenced); nothing is published."""

    epoch: int


# writer -> reader
#: what the reader sends a writer after its StartWriter: each is one call of OriginWriter.handle,
#: if the writer actor's order finds it live (pipeline.writer_order)
WriterMessage = ResetWriter | Batch | Tick | FlushOpen | DropOpen


@dataclass(frozen=True)
class Published:
    kind: str
    day: str
    first_offset: int
    last_offset: int
    rows: int
    nbytes: int
    path: str
    #: the intent written before the file: the value itself, not its name to parse back
    intent: IntentName
    seconds: float
    last_event_ms: int


@dataclass(frozen=True)
class WriterReport:
    """Sent after every message a writer handles, so the reader can move W."""

    origin: str
    partition: int
    epoch: int
    handled: int  # batches handled by this message (0 or 1)
    upto: int
    open_first: int | None
    published: tuple[Published, ...]
    buffered_bytes: int
    open_files: int
    oldest_open_s: float | None  # monotonic time the oldest open file was opened
    store_failing: bool
    fenced_path: str | None
    rows_in: int
    quarantined: tuple[tuple[str, int], ...]  # (reason, count) found while decoding
    skipped: int
    store_error: str = ""  # the last failed publish's error, while store_failing
    storage_failures: int = 0  # publish attempts that raised StorageError since the last report
    storage_retries: int = 0  # ... of which will be tried again (the rest ended the process)


# exporter <-> reader, shutdown
@dataclass(frozen=True)
class StopReader:
    reason: str


@dataclass(frozen=True)
class ReaderStopped:
    reason: str
