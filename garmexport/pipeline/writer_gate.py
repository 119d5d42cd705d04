"""Which of the reader's messages a writer's lane takes: the writer actor's own rule.

The reader states facts: a new epoch starts for the writer (``ResetWriter``), records,
ticks and flushes of an epoch arrived (``Batch``, ``Tick``, ``FlushOpen``), the epoch is
over (``DropOpen``: the partition was revoked or fenced). The writer actor decides with a
:class:`WriterGate` what work enters its lane (:mod:`garmexport.pipeline.work_lanes`):

- a message of an epoch other than the writer's current one is void and never queued: its
  records are read again by whoever owns the partition in a later epoch;
- a ``DropOpen`` of the current epoch voids the work still waiting in the lane (it has not
  started: running it would only publish files of a forgotten epoch, which fencing then
  refuses) and ends the epoch; the ``DropOpen`` itself is queued, so the writer forgets
  what it has open;
- everything else is queued, in the order it came.

This is the one place the epoch rule lives: ``OriginWriter.handle`` runs whatever its lane
gives it, and the pipeline tests' harness passes the reader's messages through a gate per
writer, as the writer actor does. Pure: no threads, no actors.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from garmexport.pipeline.messages import DropOpen, ResetWriter, WriterMessage


class Admit(enum.Enum):
    QUEUE = "queue"
    SKIP = "skip"  # of another epoch: void
    CANCEL_WAITING = "cancel waiting, then queue"  # a DropOpen of the current epoch


@dataclass
class WriterGate:
    #: the epoch of the last ResetWriter; -1 before the first and after a DropOpen
    epoch: int = -1

    def admit(self, msg: WriterMessage) -> Admit:
        """What to do with ``msg`` (and move the epoch as the writer will)."""
        if isinstance(msg, ResetWriter):
            self.epoch = msg.epoch
            return Admit.QUEUE
        if msg.epoch != self.epoch:
            return Admit.SKIP
        if isinstance(msg, DropOpen):
            self.epoch = -1
            return Admit.CANCEL_WAITING
        return Admit.QUEUE
