"""What every actor shares: escalation of surprises, and opening the output store.

A handler that raises does not let thespian redeliver the message (a writer with an open
file is not idempotent): the traceback goes to the exporter as text, which stops the
system and exits non-zero; the commit protocol makes the restart safe.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

from garmexport.config import Config
from garmexport.messages import Failure
from garmexport.storage.base import Storage
from garmexport.storage.open import open_storage

def storage_for(config: Config, instance: str) -> Storage:
    """Open the output store for ``instance``. The exporter opens it once, where its reader
    starts, and hands the same object to its writers (``StartWriter``)."""
    return open_storage(config.output.root, instance, storage_options(config))


def storage_options(config: Config) -> dict[str, str]:
    """Backend options from ``[output]``; empty values are left to the backend's defaults."""
    o = config.output
    pairs = {
        "webhdfs.user": o.hdfs_user, "webhdfs.http_port": str(o.hdfs_http_port),
        "webhdfs.timeout_s": str(o.hdfs_timeout_s), "webhdfs.attempts": str(o.hdfs_attempts),
        "s3.endpoint": o.s3_endpoint_url, "s3.region": o.s3_region,
        "s3.access_key": o.s3_access_key_id, "s3.secret_key": o.s3_secret_access_key,
    }
    return {k: v for k, v in pairs.items() if v}


def escalating(where: str) -> Callable:
    """Decorate a handler: any exception becomes a Failure sent to ``self.exporter``."""

    def wrap(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def run(self: Any, msg: Any, sender: Any) -> None:
            try:
                handler(self, msg, sender)
            except Exception:  # noqa: BLE001 - every surprise stops the exporter
                target = getattr(self, "exporter", None) or sender
                self.send(target, Failure(where, traceback.format_exc()))
        return run

    return wrap
