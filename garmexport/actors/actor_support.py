"""What every actor shares: escalation of surprises, and opening the output store.

A handler that raises does not let thespian redeliver the message (a writer with an open
file is not idempotent): the traceback goes to the exporter as text, which stops the
system and exits non-zero; the commit protocol makes the restart safe.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from garmexport.settings.config import Config
from garmexport.pipeline.messages import Failure
from garmexport.storage.base import Storage
from garmexport.storage.open import open_storage
from garmexport.storage.options import from_output


def storage_for(config: Config, instance: str) -> Storage:
    """Open the output store for ``instance``. The exporter opens it once, where its reader
    starts, and hands the same object to its writers (``StartWriter``)."""
    return open_storage(config.output.root, instance, from_output(config.output))


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
