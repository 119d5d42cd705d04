"""The instance's health from its readers' (``actors.parallelism`` > 1): one
``/health/live`` and one ``/health/ready`` for the operator, as with one process.

Rule: live only while every reader is live, ready only while every reader answers
ready. A reader that answers is what it says. A reader that does not answer (gone,
stopped, stuck past the probe's timeout) is not ready at once, and not live once it has
not answered for the live timeout (``Config.live_timeout_s``): the threshold a reader
applies to its own loop, and one process to its loop, so that a reader frozen for less
(a GC pause, a slow store call, SIGSTOP) does not get the task killed sooner on the default
path than on one process. A reader not serving yet is live (not ready) during the start
grace. Each reason of the folded answer names its reader
(``r1: main loop silent for 31.0s > 30s``); details are kept the same way.
:func:`fold` is the rule, pure; :class:`ReadersHealth` asks the readers when a request
arrives (the supervisor keeps no state of its own that could go stale, but when each
reader last answered: :meth:`~garmexport.observe.reader_probe.ReaderProbe.last_answer`).
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


def reader_liveness(answer: Answer, silent_s: float, live_timeout_s: float,
                    starting: bool = False) -> Status:
    """One reader's liveness: its answer's when it answers (or is not serving yet, see
    :func:`reader_status`); else live while it has been silent (``silent_s``, since its last
    answer) for at most ``live_timeout_s``, with a detail saying so."""
    if answer.status is not None or not answer.serving:
        return reader_status(answer, starting)
    if silent_s <= live_timeout_s:
        return Status(True, detail=(("not_answering", f"for {silent_s:.1f}s, live until "
                                     f"{live_timeout_s:g}s: {answer.error}"),))
    return Status(False, (f"{answer.error} (silent {silent_s:.1f}s > live timeout "
                          f"{live_timeout_s:g}s)",))


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

    Until ``start_grace_s`` after ``started`` (monotonic seconds, the probe's clock), a
    reader that has not said where it serves yet counts as live (not as ready): a single
    process is live as soon as it answers, and the instance's port answers before its
    readers do. A reader that does not answer is live for ``live_timeout_s`` after its last
    answer (after ``started`` if it never answered)."""

    def __init__(self, probe: ReaderProbe, started: float, start_grace_s: float,
                 live_timeout_s: float) -> None:
        if live_timeout_s <= 0:
            raise ValueError(f"live_timeout_s must be positive, not {live_timeout_s}")
        self._probe, self._started = probe, started
        self._grace_until = started + start_grace_s
        self._live_timeout_s = live_timeout_s

    def liveness(self, now: float) -> Status:
        """A reader that answers judges its own liveness by its own clock; ``now`` ends the
        start-up grace and measures how long a reader has not answered."""
        starting = now <= self._grace_until

        def status(a: Answer) -> Status:
            last = self._probe.last_answer(a.reader)
            silent_s = now - (self._started if last is None else last)
            return reader_liveness(a, silent_s, self._live_timeout_s, starting)
        return fold((a.reader, status(a)) for a in self._probe.get_all(LIVE_PATH))

    def readiness(self) -> Status:
        return fold((a.reader, reader_status(a)) for a in self._probe.get_all(READY_PATH))
