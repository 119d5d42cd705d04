"""Whether the store works, as the reader sees it: pausing the partitions, and the episodes.

Writers report ``store_failing`` while their publishes fail, or while they wait out the
back-off they share (their error then starts with "waiting", which is no reason of its own);
the marker writer has its own ``failing``. While any writer fails, every assigned partition
is paused (the consumer keeps polling, so the instance stays in its group; DESIGN.md 4.9),
and all are resumed once none does. A failure episode (:class:`StoreEpisode`) is logged
once when it starts, with the first real reason, and once when it ends (``resumed``);
``ok`` is what readiness reports. Time is an argument (monotonic seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from garmexport.observe.logs import log_event
from garmexport.pipeline.reader_state import Assigned, KafkaPort
from garmexport.pipeline.store_episode import StoreEpisode

log = logging.getLogger(__name__)


class StoreWatch:
    def __init__(self, kafka: KafkaPort) -> None:
        self._kafka = kafka
        #: every assigned partition is paused in the consumer
        self.paused = False
        #: no store failure episode under way
        self.ok = True
        self.episode = StoreEpisode()
        #: (what failed: "publish" or "marker", "<exception class>: <message>"), for the
        #: line that starts an episode
        self.error = ("publish", "")

    def writer_reported(self, failing: bool, error: str) -> None:
        """A writer's report: a failure of its own (not a wait for the shared back-off)
        becomes the reason."""
        if failing and error and not error.startswith("waiting"):
            self.error = ("publish", error)

    def markers_written(self, error: str) -> None:
        """After the markers that were due: a failed write becomes the reason."""
        if error:
            self.error = ("marker", error)

    def update_pause(self, assigned: Mapping[int, Assigned]) -> None:
        """Pause every assigned partition while a writer fails, resume once none does."""
        errors = [v.store_error for a in assigned.values() for v in a.writers.values()
                  if v.store_failing]
        failing = bool(errors)
        if failing and not self.paused:
            self._kafka.pause(sorted(assigned))
            self.paused = True
            # a writer's own failure says more than another's "waiting" for one
            why = min(errors, key=lambda e: e.startswith("waiting") or not e)
            log_event(log, "paused", level=logging.WARNING, partitions=sorted(assigned),
                      reason=f"store failing: {why or 'publish failed'}")
        elif not failing and self.paused:
            self._kafka.resume(sorted(assigned))
            self.paused = False

    def update_store(self, assigned: Mapping[int, Assigned], markers_failing: bool,
                     now: float) -> None:
        """One line when a store failure episode starts (with its reason), one when it
        ends (``resumed``); nothing for the failures and ticks in between."""
        writers = any(v.store_failing for a in assigned.values() for v in a.writers.values())
        if writers or markers_failing:
            op, reason = self.error
            if self.episode.failed(now, op, reason):
                log_event(log, "store_failing", level=logging.WARNING, op=op, reason=reason)
        else:
            took = self.episode.recovered(now)
            if took is not None:
                log_event(log, "resumed", partitions=sorted(assigned), failed_s=round(took, 3))
            self.error = ("publish", "")
        self.ok = self.episode.since is None
