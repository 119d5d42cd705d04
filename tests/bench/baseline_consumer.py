"""The consumer settings of the baseline programs (read limit, plain pipeline).

They match garmexport's defaults where it matters for a fair comparison: the fetch queue
refills every 10 ms, and on tansu a group join waits about half the session timeout, so
equal session settings give every program an equal join.
"""

from __future__ import annotations


def baseline_consumer_settings(bootstrap: str, group: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000}
