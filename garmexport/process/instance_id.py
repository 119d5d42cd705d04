"""The id of an exporter instance: unique per start, it names its temp dir and markers."""

from __future__ import annotations

import os
import socket
import uuid


def new_instance_id() -> str:
    """Unique per process: names its temp dir and its markers."""
    host = "".join(c if c.isalnum() or c in "-." else "-" for c in socket.gethostname())[:40]
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
