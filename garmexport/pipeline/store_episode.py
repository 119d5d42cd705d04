"""A store failure episode: from the first failed storage call to the first one that works.

The reader's store watch (``store_watch``) logs one line when an episode starts (with its
reason) and one when it ends (``resumed``), not one per failed call or tick; liveness fails
once an episode has lasted longer than the live timeout (the loop makes no progress). Pure:
callers pass ``now`` (monotonic seconds).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StoreEpisode:
    since: float | None = None  # when the first failure of the episode was seen
    op: str = ""  # what failed first: "publish" or "marker"
    reason: str = ""  # "<exception class>: <message>" of that failure

    def failed(self, now: float, op: str, reason: str) -> bool:
        """A storage call failed (``reason`` may be empty: a writer held back by the shared
        back-off did not try). True if this starts an episode: log it then, only then."""
        if self.since is None:
            self.since, self.op, self.reason = now, op, reason
            return True
        if reason and not self.reason:
            self.op, self.reason = op, reason
        return False

    def recovered(self, now: float) -> float | None:
        """The store works again: the episode's length in seconds, None if none was under way."""
        if self.since is None:
            return None
        took = now - self.since
        self.since, self.op, self.reason = None, "", ""
        return took
