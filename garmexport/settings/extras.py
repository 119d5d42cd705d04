"""Optional dependencies ("extras" in setup.cfg): which feature needs which, and the one
line that tells an operator what to install.

The exporter itself needs none of them. ``garmexport compact`` needs PySpark (extra
``spark``); a WebHDFS root with ``output.hdfs_kerberos = true`` needs ``requests-gssapi``
(extra ``kerberos``). A missing extra is a usage error (exit 2), never a traceback.
"""

from __future__ import annotations

import importlib

#: extra -> (importable module, what needs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "spark": ("pyspark", "compaction runs on PySpark"),
    "kerberos": ("requests_gssapi", "WebHDFS with Kerberos speaks SPNEGO through requests-gssapi"),
}
#: command -> the extra it cannot run without
COMMAND_EXTRAS: dict[str, str] = {"compact": "spark"}


def missing(extra: str) -> str | None:
    """None when ``extra``'s module imports; else one line saying what to install."""
    module, why = EXTRAS[extra]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return (f"{why}, and {module} cannot be imported ({exc}): "
                f"pip install 'garmexport[{extra}]'")
    return None
