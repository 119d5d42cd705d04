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


def escalating(where: str) -> Callable:
    """Decorate a handler: any exception becomes a Failure sent to ``self.exporter``."""

    def wrap(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def run(self: Any, msg: Any, sender: Any) -> None:
            try:
                handler(self, msg, sender)
            except Exception as exc:  # noqa: BLE001 - every surprise stops the exporter
                target = getattr(self, "exporter", None) or sender
                self.send(target, Failure.of(where, exc))
        return run

    return wrap
