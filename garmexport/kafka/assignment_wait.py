"""When to say that the consumer is still waiting for its group to assign it partitions.

From the subscription until the first assignment, and again from a revoke or a loss of
partitions until the next assignment, the exporter holds no partition and would log
nothing: a group that never completes its join (a member that left mid-join on some
brokers, a member that stopped polling and holds the rebalance up to
``max.poll.interval.ms``) looked like a healthy idle exporter. :class:`AssignmentWait`
says when, every ``every_s`` of waiting, one ``waiting_for_assignment`` line is due and
how long the wait has lasted. An assignment, even of no partition, ends the wait: the
group answered.

Pure: ``now`` is monotonic seconds, passed in.
"""

from __future__ import annotations


class AssignmentWait:
    def __init__(self, every_s: float, now: float) -> None:
        if every_s <= 0:
            raise ValueError(f"every_s must be positive, got {every_s}")
        self.every_s = every_s
        self._since: float | None = now
        self._next = now + every_s

    @property
    def waiting(self) -> bool:
        return self._since is not None

    def assigned(self) -> None:
        """The group assigned partitions (maybe none): the wait is over."""
        self._since = None

    def unassigned(self, now: float) -> None:
        """Partitions were revoked or lost: a wait starts unless one is under way."""
        if self._since is None:
            self._since, self._next = now, now + self.every_s

    def due(self, now: float) -> float | None:
        """Seconds waited so far when a line is due now (then the next is ``every_s``
        later), else None."""
        if self._since is None or now < self._next:
            return None
        self._next = now + self.every_s
        return now - self._since
