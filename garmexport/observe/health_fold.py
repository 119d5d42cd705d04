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


def reader_status(answer: Answer, starting: bool = False) -> Status:
    """One reader's answer as a :class:`Status` (a missing or unreadable body: the HTTP
    status alone decides). ``starting``: a reader not serving yet is ok (liveness within
    the start-up grace)."""
    if answer.status is None:
        return Status(starting and not answer.serving, (answer.error,))
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
    """A :class:`garmexport.observe.health.HealthSource` that folds the readers' answers.

    Until ``start_grace_s`` after ``started`` (monotonic seconds), a reader that has not
    said where it serves yet counts as live (not as ready): a single process is live as
    soon as it answers, and the instance's port answers before its readers do."""

    def __init__(self, probe: ReaderProbe, started: float, start_grace_s: float) -> None:
        self._probe = probe
        self._grace_until = started + start_grace_s

    def liveness(self, now: float) -> Status:
        """Each reader judges its own liveness by its own clock; ``now`` only ends the
        start-up grace."""
        starting = now <= self._grace_until
        return fold((a.reader, reader_status(a, starting))
                    for a in self._probe.get_all(LIVE_PATH))

    def readiness(self) -> Status:
        return fold((a.reader, reader_status(a)) for a in self._probe.get_all(READY_PATH))
