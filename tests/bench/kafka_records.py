"""A confluent_kafka ``Message`` stand-in for the micro-benchmarks: the four methods the
router calls, with ``__slots__`` so that building a poll of them costs little."""

from __future__ import annotations


class PyRecord:
    __slots__ = ("_offset", "_value", "_ts", "_key")

    def __init__(self, offset: int, value: bytes | None, ts: int,
                 key: bytes | None = None) -> None:
        self._offset, self._value, self._ts, self._key = offset, value, ts, key

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts)

    def key(self) -> bytes | None:
        return self._key
