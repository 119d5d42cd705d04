"""Whether the secure HDFS modules run here (``tox -e hdfs-kerberos``), said once.

Each secure module calls :func:`skip_unless_secure` before it imports from another one:
pytest keeps a test module that skipped on import half-made in ``sys.modules``, so a second
module importing names from it would fail with an ImportError instead of skipping too.
"""

from __future__ import annotations

import os

import pytest

from tests.kdc import missing

_HOW = "run `tox -e hdfs-kerberos` (Maven, a JDK, libkrb5-dev, gcc, krb5-kdc, krb5-user)"


def skip_unless_secure() -> None:
    """Skip the calling module, loudly, unless the secure tier is asked for and can run;
    fail it where it is asked for and cannot (GARMEXPORT_REQUIRE_HDFS and _KERBEROS)."""
    required = bool(os.environ.get("GARMEXPORT_REQUIRE_HDFS")) and bool(
        os.environ.get("GARMEXPORT_REQUIRE_KERBEROS"))
    why = None
    if not required:
        why = "GARMEXPORT_REQUIRE_HDFS and GARMEXPORT_REQUIRE_KERBEROS are not both set"
    elif missing():
        why = f"Debian's {' '.join(missing())} missing"
    else:
        try:
            import gssapi  # noqa: F401 - the kerberos extra
        except ImportError:
            why = "the `kerberos` extra (gssapi) is not installed"
    if why is None:
        return
    if required:
        raise RuntimeError(f"secure HDFS tests cannot run: {why}")
    pytest.skip(f"\n{'#' * 70}\n## secure HDFS tests SKIPPED: {why}; {_HOW}\n{'#' * 70}",
                allow_module_level=True)
