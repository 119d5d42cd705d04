"""When the reader's gathered records leave for their writers, and when writers publish.

The reader routes each poll into batches held per origin; this class decides when they
and the writers' open files move on (the rules are pure, in :mod:`garmexport.protocol.flush`):

- a held batch leaves once it has ``decode_batch_records`` records or has waited
  ``decode_batch_wait_s`` (``send_pending``); the writer of an origin is reset
  (``ResetWriter``) before the first batch of its epoch;
- a burst (a catch-up) ends once its partition has been idle for ``idle_flush_s``: what is
  held leaves and every open file of the partition is published (``flush_idle``,
  ``end_burst``);
- over the open-file or buffered-byte budget, whole writers are flushed, oldest first
  (``enforce_budget``); records held here or queued for writers count against the bytes.

Time is an argument (monotonic seconds); messages go out through ``send``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from garmexport.settings.config import WriterConfig
from garmexport.observe.logs import log_event
from garmexport.pipeline.messages import Batch, FlushOpen, ResetWriter, WriterMessage
from garmexport.pipeline.reader_state import Assigned, KafkaPort
from garmexport.protocol.flush import WriterLoad, burst_ends_in, fits, writers_to_flush

log = logging.getLogger(__name__)


class Flusher:
    def __init__(self, config: WriterConfig, send: Callable[[str, int, WriterMessage], None],
                 kafka: KafkaPort, queued_bytes: Callable[[], int]) -> None:
        self._w, self._send, self._kafka = config, send, kafka
        #: bytes of batches sent to writers that they have not handled yet (queued in their
        #: writer actors or running, pipeline.writer_work): memory the budget counts like
        #: gathered records
        self._queued_bytes = queued_bytes

    def _ensure_writer(self, a: Assigned, origin: str, p: int) -> None:
        if a.writer_started(origin):
            self._send(origin, p, ResetWriter(a.epoch, a.states[origin]))

    def send_pending(self, partition: int, a: Assigned, now: float, force: bool = False) -> None:
        """Hand gathered records to their writers once a batch is large or old enough.

        ``upto`` is what the reader has routed when the batch leaves: every record of the
        origin up to it is in this batch or an earlier one.
        """
        w = self._w
        due = [origin for origin, (b, since) in a.pending.items()
               if force or len(b.offsets) >= w.decode_batch_records
               or now - since >= w.decode_batch_wait_s]
        for origin in due:
            b = a.release(origin)
            self._ensure_writer(a, origin, partition)
            self._send(origin, partition, Batch(
                a.epoch, a.ledger.processed, b.offsets, tuple(b.values),
                b.kafka_ts, b.days, tuple(b.bad), b.nbytes))

    def idle_in(self, p: int, a: Assigned, now: float) -> float | None:
        """Seconds until the partition's burst ends (flush.burst_ends_in)."""
        w = self._w
        return burst_ends_in(a.burst, w.decode_batch_records, a.last_record_s, w.idle_flush_s,
                             now, lambda: self._kafka.behind(p))

    def flush_idle(self, assigned: Mapping[int, Assigned], now: float) -> float | None:
        """Publish the open files of partitions whose burst ended; called after every poll.

        Returns the seconds until the next burst may end (None: no burst under way), so
        the caller's next poll waits no longer than that.
        """
        wait = None
        for p, a in assigned.items():
            left = self.idle_in(p, a, now)
            if left is None:
                continue
            if left <= 0:
                self.end_burst(p, a, now)
            else:
                wait = left if wait is None else min(wait, left)
        return wait

    def end_burst(self, p: int, a: Assigned, now: float) -> None:
        """Hand over what is gathered and publish every open file of the partition."""
        log_event(log, "flush_burst_end", level=logging.DEBUG, partition=p, records=a.burst,
                  writers=len(a.reset_sent))
        self.send_pending(p, a, now, force=True)
        for origin in a.reset_sent:
            self._send(origin, p, FlushOpen(a.epoch, 0))
        a.burst_ended()

    def enforce_budget(self, assigned: Mapping[int, Assigned]) -> None:
        """Over the open-file or buffered-byte budget: flush whole writers, oldest first."""
        w = self._w
        views = [v for a in assigned.values() for v in a.writers.values()]
        pending = self.pending_bytes(assigned)
        # checked after every poll: when everything (even writers already asked to flush)
        # fits, writers_to_flush would choose none, so skip building its loads
        if fits(sum(v.open_files for v in views), sum(v.buffered_bytes for v in views) + pending,
                w.max_open_files, w.max_buffered_bytes):
            return
        loads = [WriterLoad((p, o), v.open_files, v.buffered_bytes, v.oldest_open_s or 0.0,
                            v.flush_requested)
                 for p, a in assigned.items() for o, v in a.writers.items()]
        chosen = writers_to_flush(loads, w.max_open_files, w.max_buffered_bytes, pending)
        if chosen:
            log_event(log, "flush_budget", level=logging.DEBUG, writers=len(chosen),
                      open_files=sum(v.open_files for v in views),
                      buffered_bytes=sum(v.buffered_bytes for v in views) + pending)
        for p, origin in chosen:  # type: ignore[misc]
            a = assigned[p]
            a.writers[origin].request_flush()
            self._send(origin, p, FlushOpen(a.epoch, 0))

    def pending_bytes(self, assigned: Mapping[int, Assigned]) -> int:
        """Bytes of the records gathered for the writers, not yet sent or not yet handled."""
        return (sum(b.nbytes for a in assigned.values() for b, _ in a.pending.values())
                + self._queued_bytes())
