"""What a stop forced now would abandon, as the reader last counted it.

A second SIGTERM (or SIGINT), or a stop still running past its deadline, ends the process
at once (:mod:`garmexport.process.stop_signal`). Nothing half-written is visible then, but
the operator should read what was given up: the files open in the writers, whose records
were read but not published. The reader actor refreshes one :class:`Unfinished` on every
tick (its only writer); the main loop reads it once, for the ``stop_forced`` line, from
the signal handler or the deadline's timer thread: a snapshot up to a tick old.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Unfinished:
    #: files open in the writers: records read, not yet published
    open_files: int = 0
    #: the partitions held (whose records those are)
    partitions: tuple[int, ...] = field(default_factory=tuple)

    def update(self, open_files: int, partitions: tuple[int, ...]) -> None:
        self.open_files, self.partitions = open_files, partitions

    def fields(self) -> dict[str, object]:
        """The ``stop_forced`` line's account of what is abandoned."""
        if not self.open_files:
            what = "no open file (as of the last tick): nothing read is left unpublished"
        else:
            what = (f"{self.open_files} open files not published (records of partitions "
                    f"{list(self.partitions)} read since their last published file); safe to "
                    "redo: the next start reads them again from the output's markers")
        return {"open_files": self.open_files, "partitions": list(self.partitions),
                "abandoned": what}
