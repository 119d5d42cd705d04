"""What every actor shares: escalation of surprises.

A handler that raises does not let thespian redeliver the message (a writer with an open
file is not idempotent): the traceback goes to the exporter as text, which stops the
system and exits non-zero; the commit protocol makes the restart safe.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from garmexport.pipeline.messages import Failure


def escalate(actor: Any, sender: Any, where: str, exc: BaseException) -> None:
    """Send the Failure of ``exc``, caught in ``where``, to ``actor.exporter`` (to
    ``sender`` before the actor knows it); call it in the ``except`` block."""
    actor.send(getattr(actor, "exporter", None) or sender, Failure.of(where, exc))


def escalating(where: str) -> Callable:
    """Decorate a handler: any exception becomes a Failure sent to ``self.exporter``."""

    def wrap(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def run(self: Any, msg: Any, sender: Any) -> None:
            try:
                handler(self, msg, sender)
            except Exception as exc:  # noqa: BLE001 - every surprise stops the exporter
                escalate(self, sender, where, exc)
        return run

    return wrap
