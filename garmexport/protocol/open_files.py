"""The open files of one writer (one origin in one partition), without I/O.

Invariants this module keeps (DESIGN.md 4.1):

- at most one open file per chain (kind, day); a file leaves the set only to be published,
  so within a chain each file is committed before the next one opens;
- events arrive in offset order, so a file's first offset is its lowest and the chain's
  sub-stream is cut into consecutive stretches;
- an event at or below its chain's skip bound (W of the origin at assignment, or the
  chain's last published offset) is already published and must not be written again.

The buffered pieces are opaque to this module (Arrow tables in practice): the writer
(:mod:`garmexport.pipeline.origin_writer`) decodes, slices and serialises them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from garmexport.protocol.flush import FlushLimits, OpenFileInfo, due
from garmexport.protocol.resume import OriginState

ChainKey = tuple[str, str]  # (kind, day)


@dataclass
class OpenFile:
    kind: str
    day: str
    first_offset: int
    last_offset: int
    opened_at_s: float
    rows: int = 0
    nbytes: int = 0  # values, towards max_file_bytes
    held: int = 0  # memory kept alive, towards the process's memory budget
    pieces: list[object] = field(default_factory=list)

    @property
    def key(self) -> ChainKey:
        return (self.kind, self.day)


class OpenFiles:
    """Open files by chain, and the origin's resume state as their publishes advance it."""

    def __init__(self, state: OriginState) -> None:
        #: what is published: the writer skips by :meth:`OriginState.skip_bound`
        self.state = state
        self._files: dict[ChainKey, OpenFile] = {}

    def add(
        self, kind: str, day: str, piece: object, first: int, last: int, rows: int,
        nbytes: int, now_s: float, held: int,
    ) -> None:
        """Append a piece holding offsets ``first``..``last`` (in order) to its chain's file;
        ``nbytes`` of values, keeping ``held`` bytes of memory alive."""
        if first <= self.state.skip_bound(kind, day):
            raise ValueError(f"offset {first} of chain {kind}/{day} is already published")
        f = self._files.get((kind, day))
        if f is None:
            f = self._files[(kind, day)] = OpenFile(kind, day, first, last, now_s)
        elif first <= f.last_offset:
            raise ValueError(f"offset {first} is not past {f.last_offset} in chain {kind}/{day}")
        f.last_offset = last
        f.rows += rows
        f.nbytes += nbytes
        f.held += held
        f.pieces.append(piece)

    def open_first(self) -> int | None:
        """First offset of the oldest (by offset) open file: W is one below it."""
        return min((f.first_offset for f in self._files.values()), default=None)

    def infos(self) -> list[OpenFileInfo]:
        return [OpenFileInfo(f.key, f.rows, f.nbytes, f.opened_at_s) for f in self._files.values()]

    def due(self, limits: FlushLimits, now_s: float) -> list[ChainKey]:
        return due(self.infos(), limits, now_s)  # type: ignore[return-value]

    def keys(self) -> list[ChainKey]:
        return sorted(self._files, key=lambda k: self._files[k].opened_at_s)

    def get(self, key: ChainKey) -> OpenFile:
        return self._files[key]

    def published(self, key: ChainKey) -> OpenFile:
        """Remove the file of ``key`` after its publish succeeded; later events of the chain
        open a new file whose first offset follows this one's last."""
        f = self._files.pop(key)
        self.state = self.state.published(f.kind, f.day, f.last_offset)
        return f

    def drop_all(self) -> int:
        """Forget every open file (revoke, fencing); return how many were dropped."""
        n = len(self._files)
        self._files.clear()
        return n

    @property
    def buffered_bytes(self) -> int:
        """Memory the open files keep alive (what the memory budget counts)."""
        return sum(f.held for f in self._files.values())

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, key: object) -> bool:
        return key in self._files
