"""Retry a storage call with exponential back-off and jitter.

Rules (design 4.6): a failed write or publish is retried with back-off; when the attempts
(or the optional time budget) are spent, the last error propagates and the caller decides
(the exporter exits non-zero and is restarted). :class:`PublishConflict` is an answer, not
a failure: it is never retried. Sleep, clock and randomness are arguments so tests run
without waiting.

Delays: :func:`garmexport.protocol.backoff.jittered_delay_s`, the one back-off formula with "equal
jitter" (never less than half the nominal delay, so a burst of failing callers spreads out
without hammering the store).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from garmexport.protocol.backoff import jittered_delay_s
from garmexport.errors import PublishConflict, StorageError

T = TypeVar("T")

#: on_retry(retry_number, error, delay_s) is called before each sleep.
OnRetry = Callable[[int, BaseException, float], None]


def retry(
    fn: Callable[[], T],
    attempts: int,
    initial_s: float,
    max_s: float,
    *,
    on_retry: OnRetry | None = None,
    retry_on: tuple[type[BaseException], ...] = (StorageError,),
    deadline_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    unit: Callable[[], float] = random.random,
) -> T:
    """Call ``fn`` up to ``attempts`` times (>= 1) and return its first result.

    Retries errors that are instances of ``retry_on`` except PublishConflict; anything
    else propagates at once. ``deadline_s`` is a budget in seconds of ``clock`` measured
    from the first call: no retry starts whose delay would end past it. The last error is
    re-raised when attempts or budget run out.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    start = clock()
    retry_number = 0
    while True:
        try:
            return fn()
        except PublishConflict:
            raise
        except retry_on as exc:
            retry_number += 1
            if retry_number >= attempts:
                raise
            delay = jittered_delay_s(retry_number, initial_s, max_s, unit())
            if deadline_s is not None and clock() + delay - start > deadline_s:
                raise
            if on_retry is not None:
                on_retry(retry_number, exc, delay)
            sleep(delay)
