"""What a run may rewrite: the one rule of compaction and of repair (pure).

Rewriting a file means moving its rows into a compacted file of a new generation of its
day and deleting its name (:mod:`.swap`). Rule (DESIGN.md 6)::

    compacted file (a name the exporter never uses)         always: its rows are all at
                                                            or below W, as its inputs' were
    raw file of the exporter, origin O (its place when the  only when its highest offset is
      name has none), partition P                           at or below W(O, P), and its
                                                            day is closed
    a Garmadon JVM exporter's file                          never (the takeover leaves
                                                            them as they are)
    a name garmexport did not give                          never

Why W: the exporter never writes an offset at or below W again and never needs the name
of such a file to fence a zombie (fencing concerns files whose first offset is above W).
Why a closed day: a zombie that still holds a file of an open day may publish it again
(the lateness delay outlives any zombie: :mod:`.closed`). A type no marker names has no W:
its raw files wait.

Compaction (:mod:`.job` for the day, :func:`.plan.plan_day` per file) and repair
(:func:`garmexport.repair.rows.verdict`) both ask :func:`rewritable`; compaction plans
closed days only, since it rewrites a compacted file only together with a raw one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from garmexport.compaction.closed import is_closed
from garmexport.compaction.names import CompactedName
from garmexport.protocol.jvm_names import JvmFile
from garmexport.protocol.naming import FileName, day_number

#: W of (source, topic, partition, origin), None when no marker names the origin there
CommittedPoint = Callable[[str, str, int, str], "int | None"]


@dataclass(frozen=True)
class Rewritable:
    """Whether a run may rewrite one file: ``why_not`` is '' when it may."""

    why_not: str = ""

    @property
    def ok(self) -> bool:
        return not self.why_not


def day_closed(day: str | None, last_closed: int | None) -> bool:
    """Whether ``day`` (``YYYY-MM-DD``; None: not a day) is at or before the last closed
    day number (:func:`.closed.last_closed_day`; None: no day is closed)."""
    return day is not None and is_closed(day_number(day), last_closed)


def rewritable(place: str, day: str | None, name: str, last_offset: int,
               committed: CommittedPoint, closed: bool) -> Rewritable:
    """Whether the file ``name`` of ``place`` (a dataset or ``_quarantine``) and ``day``
    whose highest offset is ``last_offset`` may be rewritten, given W (``committed``) and
    whether the day is ``closed`` (:func:`day_closed`; see the module docstring)."""
    if CompactedName.parse(name) is not None:
        return Rewritable()
    raw = FileName.parse(name)
    if raw is None:
        if JvmFile.parse(name) is not None:
            return Rewritable("a Garmadon JVM exporter's file (left as the takeover promises)")
        return Rewritable("not named by garmexport")
    origin = raw.origin or place
    w = committed(raw.source, raw.topic, raw.partition, origin)
    if w is None:
        return Rewritable(f"no marker names {origin} in partition {raw.partition} yet")
    if last_offset > w:
        return Rewritable(f"above the committed point ({last_offset} > {w}): the "
                          "exporter may still need its name")
    if not closed:
        return Rewritable(f"day {day} is not closed yet (compaction.lateness_s)")
    return Rewritable()
