"""The instance's health from its readers' (``actors.parallelism`` > 1): one
``/health/live`` and one ``/health/ready`` for the operator, as with one process.

Rule: live only while every reader answers live, ready only while every reader answers
ready. A reader that does not answer (not serving yet, gone, stopped, stuck past the
probe's timeout) is neither. Each reason of the folded answer names its reader
(``r1: main loop silent for 31.0s > 30s``); readiness details are kept the same way.
:func:`fold` is the rule, pure; :class:`ReadersHealth` asks the readers when a request
arrives (the supervisor keeps no state of its own that could go stale).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from garmexport.observe.health import LIVE_PATH, READY_PATH, Status
from garmexport.observe.reader_probe import Answer, ReaderProbe


def reader_status(answer: Answer) -> Status:
    """One reader's answer as a :class:`Status` (a missing or unreadable body: the HTTP
    status alone decides)."""
    if answer.status is None:
        return Status(False, (answer.error,))
    try:
        doc = json.loads(answer.body)
        reasons = tuple(str(r) for r in doc.get("reasons", ()))
        detail = tuple((str(k), str(v)) for k, v in dict(doc.get("detail", {})).items())
    except (ValueError, TypeError, AttributeError):
        reasons, detail = (), ()
    ok = answer.status == 200
    if not ok and not reasons:
        reasons = (f"HTTP {answer.status}",)
    return Status(ok, reasons if not ok else (), detail)


def fold(statuses: Iterable[tuple[str, Status]]) -> Status:
    """Ok iff every reader's status is ok; reasons and details prefixed by the reader."""
    ok, reasons, detail = True, [], []
    for reader, status in statuses:
        ok = ok and status.ok
        reasons += [f"{reader}: {why}" for why in status.reasons]
        detail += [(f"{reader}.{name}", note) for name, note in status.detail]
    return Status(ok, tuple(reasons), tuple(detail))


class ReadersHealth:
    """A :class:`garmexport.observe.health.HealthSource` that folds the readers' answers."""

    def __init__(self, probe: ReaderProbe) -> None:
        self._probe = probe

    def liveness(self, now: float) -> Status:
        """``now`` is unused: each reader judges its own liveness by its own clock."""
        return self._ask(LIVE_PATH)

    def readiness(self) -> Status:
        return self._ask(READY_PATH)

    def _ask(self, path: str) -> Status:
        return fold((a.reader, reader_status(a)) for a in self._probe.get_all(path))
