"""When the reader polls Kafka, and how long a poll may wait: the reader's pacing rules.

The reader actor polls on a wakeup loop; before each poll it asks these rules:

- **Wait for the writers instead of reading** (:func:`work_full`) while the batches queued
  for writers (:mod:`garmexport.pipeline.writer_work`) hold more than an eighth of
  ``writer.max_buffered_bytes``. Queued batches count against the whole budget with
  everything else the reader holds (the flusher's rule), but the budget can only flush
  open files; what is queued for writers is bounded
  here, so a slow store or one busy writer cannot make them grow without bound. An eighth
  leaves most of the budget to what the writers buffer in open files.
- **How long a poll waits** (:func:`poll_timeout_s`): at most ``source.poll_timeout_s``; no
  longer than until a burst may end (so a catch-up is published when it ends); and only
  :data:`SHORT_POLL_S` while the writers have work (sent since the last poll, or still
  running), since their reports are taken only between polls: a long poll on a quiet topic
  would hold back W, the lag and the markers. Not 0: a poll that returns at once takes only
  what librdkafka has queued so far, and many small batches cost more than a short wait.

Pure: the reader actor passes what it knows.
"""

from __future__ import annotations

#: the poll timeout while the writers have work, and the wait for their reports while
#: their queued work is full (seconds)
SHORT_POLL_S = 0.05
#: the shortest wait for a burst's end (seconds): a poll of 0 would spin
MIN_IDLE_WAIT_S = 0.01
#: batches queued for writers may hold 1/WORK_SHARE of writer.max_buffered_bytes
WORK_SHARE = 8


def work_cap(max_buffered_bytes: int) -> int:
    """Bytes of batches queued for writers before the reader stops polling (at least 1)."""
    return max(1, max_buffered_bytes // WORK_SHARE)


def work_full(queued_bytes: int, max_buffered_bytes: int) -> bool:
    """Whether the reader should wait for the writers' reports rather than poll."""
    return queued_bytes > work_cap(max_buffered_bytes)


def poll_timeout_s(configured_s: float, idle_wait_s: float | None, writers_busy: bool) -> float:
    """The next poll's timeout: ``configured_s`` (``source.poll_timeout_s``), no longer than
    ``idle_wait_s`` (seconds until a burst may end, None: no burst under way; at least
    :data:`MIN_IDLE_WAIT_S`), and at most :data:`SHORT_POLL_S` while ``writers_busy``."""
    timeout = configured_s
    if idle_wait_s is not None:
        timeout = min(timeout, max(idle_wait_s, MIN_IDLE_WAIT_S))
    if writers_busy:
        timeout = min(timeout, SHORT_POLL_S)
    return timeout
