"""``python -m garmexport``: the same as the ``garmexport`` command."""

from __future__ import annotations

from garmexport.cli.main import entry

entry()
