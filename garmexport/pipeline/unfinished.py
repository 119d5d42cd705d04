"""What a stop forced now abandons, counted at the moment it is forced.

A second SIGTERM (or SIGINT), or a stop still running past its deadline, ends the process
at once (:mod:`garmexport.process.stop_signal`). Nothing half-written is visible then, but
the operator should read what was given up: the files open in the writers, whose records
were read but not published. The reader actor hands :class:`Unfinished` the executor's
count (:meth:`garmexport.pipeline.writer_work.WriterWork.open_files`) when it starts; the
main loop asks it once, for the ``stop_forced`` line, from the signal handler or the
deadline's timer thread. Before the reader has started nothing can be open.
"""

from __future__ import annotations

from collections.abc import Callable

#: (files open now, the partitions that have any)
Count = Callable[[], tuple[int, tuple[int, ...]]]


class Unfinished:
    def __init__(self) -> None:
        self._count: Count = lambda: (0, ())

    def count_with(self, count: Count) -> None:
        """Count the open files with ``count`` from now on (the reader's work pool)."""
        self._count = count

    def fields(self) -> dict[str, object]:
        """The ``stop_forced`` line's account of what is abandoned, counted now."""
        open_files, partitions = self._count()
        if not open_files:
            what = "no file open in the writers"
        else:
            what = (f"{open_files} open files not published (records of partitions "
                    f"{list(partitions)} read since their last published file); safe to "
                    "redo: the next start reads them again from the output's markers")
        return {"open_files": open_files, "partitions": list(partitions), "abandoned": what}
