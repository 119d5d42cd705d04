"""Rate limiting of repeated log lines: the first line of a kind passes, repeats are counted.

librdkafka repeats a failure every time it retries (about 1,150 ``FAIL`` lines a minute
with the broker down). :class:`RepeatLimiter` lets the first line of a key through, then
swallows repeats of that key for ``window_s`` seconds, counting them; the next line of the
key after the window passes again and carries that count. A key is the message with its
numbers blanked (:func:`repeat_key`), so "after 12ms" and "after 15ms" are one kind, and
without librdkafka's own count of the repeats it held back (", 3 identical error(s)
suppressed"), which it appends to the next line of the same message: that line is a repeat.

Invariants: pure (the caller passes ``now`` in monotonic seconds); at most ``max_keys``
keys are remembered, the oldest forgotten first, so a flood of distinct messages cannot
grow it without bound.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"\d+")
#: librdkafka's note on a line that follows repeats it held back (rdkafka_broker.c)
_ITS_OWN_COUNT = re.compile(r", # identical error\(s\) suppressed")


def repeat_key(*parts: str) -> str:
    """The kind of a message: its parts with every run of digits replaced by ``#`` and
    librdkafka's count of suppressed repeats left out."""
    return "|".join(_ITS_OWN_COUNT.sub("", _NUMBER.sub("#", part)) for part in parts)


class RepeatLimiter:
    """Decides, line by line, which repeats to swallow within a window."""

    def __init__(self, window_s: float, max_keys: int = 1000) -> None:
        if window_s <= 0 or max_keys <= 0:
            raise ValueError(f"window_s and max_keys must be positive ({window_s}, {max_keys})")
        self.window_s = window_s
        self.max_keys = max_keys
        #: key -> [start of its window, repeats swallowed in it]
        self._windows: dict[str, list] = {}

    def admit(self, key: str, now: float) -> int | None:
        """None if this line repeats ``key`` within its window (swallowed and counted);
        else the line passes and the result is how many repeats were swallowed since the
        key's last line that passed (0 for a new key)."""
        window = self._windows.get(key)
        if window is not None and now - window[0] < self.window_s:
            window[1] += 1
            return None
        swallowed = 0 if window is None else window[1]
        self._windows.pop(key, None)  # re-inserted last: dict order is age order
        self._windows[key] = [now, 0]
        if len(self._windows) > self.max_keys:
            del self._windows[next(iter(self._windows))]
        return swallowed
