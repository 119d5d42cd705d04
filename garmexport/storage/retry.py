"""Retry a storage call with exponential back-off and jitter.

Rules (design 4.6): a failed write or publish is retried with back-off; when the attempts
(or the optional time budget) are spent, the last error propagates and the caller decides
(the exporter exits non-zero and is restarted). :class:`PublishConflict` is an answer, not
a failure: it is never retried. Sleep, clock and randomness are arguments so tests run
without waiting.

Delays: the n-th retry (n = 1, 2, ...) waits ``d = min(max_s, initial_s * 2**(n-1))``
scaled into ``[d/2, d]`` by jitter ("equal jitter": never less than half the nominal
delay, so a burst of failing callers spreads out without hammering the store).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from garmexport.errors import PublishConflict, StorageError

T = TypeVar("T")

#: on_retry(retry_number, error, delay_s) is called before each sleep.
OnRetry = Callable[[int, BaseException, float], None]


def backoff_delay_s(retry_number: int, initial_s: float, max_s: float, unit: float) -> float:
    """Delay before retry ``retry_number`` (1-based); ``unit`` in [0, 1) picks the jitter."""
    if retry_number < 1:
        raise ValueError(f"retry_number starts at 1, got {retry_number}")
    # Cap the exponent first: 2**large would overflow a float long before max_s matters.
    nominal = min(max_s, initial_s * 2.0 ** min(retry_number - 1, 62))
    return nominal / 2.0 + unit * nominal / 2.0


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
            delay = backoff_delay_s(retry_number, initial_s, max_s, unit())
            if deadline_s is not None and clock() + delay - start > deadline_s:
                raise
            if on_retry is not None:
                on_retry(retry_number, exc, delay)
            sleep(delay)
