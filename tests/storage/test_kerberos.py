"""Kerberos for WebHDFS against a real MIT KDC on loopback (tests/kdc.py).

What runs for real: the KDC, ``kinit``/``klist``, the GSSAPI library on both sides, and
SPNEGO over HTTP between the backend (requests-gssapi) and the WebHDFS test double,
which checks the ``Negotiate`` token with a GSSAPI acceptor holding the ``HTTP/127.0.0.1``
service key and answers with a ``hadoop.auth`` cookie, as a NameNode does. The same
against a real secure NameNode and DataNodes: tests/hdfs/test_hdfs_kerberos.py.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from garmexport.settings.config import OutputConfig
from garmexport.errors import StorageError
from garmexport.storage.kerberos import TicketKeeper
from garmexport.storage.open import open_storage
from garmexport.storage.options import KerberosOptions, from_output
from tests.kdc import Kdc, missing
from tests.webhdfs_server import WebHdfsServer

# Outside `tox -e kerberos` these tests skip, loudly; inside it (GARMEXPORT_REQUIRE_KERBEROS
# set) a missing KDC or gssapi fails them instead: that environment exists to run them.
_REQUIRED = bool(os.environ.get("GARMEXPORT_REQUIRE_KERBEROS"))
_HOW = "run `tox -e kerberos` (needs libkrb5-dev, a C compiler, krb5-kdc, krb5-admin-server, krb5-user)"
if missing():
    _why = f"Kerberos tests SKIPPED: install Debian's {' '.join(missing())}; {_HOW}"
    if _REQUIRED:
        raise RuntimeError(_why.replace("SKIPPED", "cannot run"))
    pytest.skip(f"\n{'#' * 70}\n## {_why}\n{'#' * 70}", allow_module_level=True)
try:
    import gssapi
except ImportError:
    _why = "Kerberos tests SKIPPED: the `kerberos` extra (gssapi) is not installed; " + _HOW
    if _REQUIRED:
        raise
    pytest.skip(f"\n{'#' * 70}\n## {_why}\n{'#' * 70}", allow_module_level=True)


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    kdc = Kdc(tmp_path_factory.mktemp("kdc")).start()
    with pytest.MonkeyPatch.context() as mp:  # this process's GSSAPI uses the test realm
        for key in ("KRB5_CONFIG", "KRB5CCNAME", "KRB5RCACHETYPE"):
            mp.setenv(key, kdc.env[key])
        try:
            yield kdc
        finally:
            kdc.stop()


@pytest.fixture(scope="module")
def garm(kdc: Kdc) -> Path:
    return kdc.add("garm")


def starts(klist: str) -> list[str]:
    """The 'Valid starting' times of a klist listing."""
    return re.findall(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d)\s", klist, re.M)


def test_a_keytab_gives_a_ticket_in_a_private_cache_renewed_on_schedule(
        kdc: Kdc, garm: Path) -> None:
    keeper = TicketKeeper(KerberosOptions(principal=kdc.principal("garm"), keytab=str(garm),
                                          ccache=None, renew_s=600))
    first = keeper.ensure()
    assert keeper.ccache is not None
    listing = kdc.klist(keeper.ccache)
    assert f"Default principal: {kdc.principal('garm')}" in listing
    assert f"krbtgt/{kdc.principal('GARMEXPORT.TEST')}" in listing
    cache_dir = Path(keeper.ccache.removeprefix("FILE:")).parent
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert not Path(kdc.env["KRB5CCNAME"].removeprefix("FILE:")).exists()

    obtained = keeper.ticket.obtained_s  # type: ignore[union-attr]
    assert keeper.ensure(obtained + 599) == first  # not due: no new ticket
    assert starts(kdc.klist(keeper.ccache)) == starts(listing)
    time.sleep(1.1)  # klist shows seconds: a new ticket must start a second later
    assert keeper.ensure(obtained + 600) == first + 1
    assert starts(kdc.klist(keeper.ccache)) != starts(listing)
    keeper.close()
    assert not cache_dir.exists()


def test_a_ticket_cache_kept_outside_is_read_then_renewed(kdc: Kdc, garm: Path,
                                                         tmp_path: Path) -> None:
    ccache = f"FILE:{tmp_path / 'cc'}"
    subprocess.run(["kinit", "-r", "2h", "-kt", str(garm), "-c", ccache, kdc.principal("garm")],
                   env=kdc.env, check=True, capture_output=True)
    before = kdc.klist(ccache)
    keeper = TicketKeeper(KerberosOptions(principal=None, keytab=None, ccache=str(tmp_path / "cc"),
                                          renew_s=600))
    first = keeper.ensure()
    assert kdc.klist(ccache) == before  # read as it is
    time.sleep(1.1)
    obtained = keeper.ticket.obtained_s  # type: ignore[union-attr]
    assert keeper.ensure(obtained + 600) == first + 1  # kinit -R
    after = kdc.klist(ccache)
    assert starts(after) != starts(before)
    assert re.findall(r"renew until (.+)", after) == re.findall(r"renew until (.+)", before)


def test_no_ticket_to_be_had_is_a_storage_error_and_the_kdc_is_not_hammered(
        kdc: Kdc, tmp_path: Path) -> None:
    keytab = kdc.add("gone")
    kdc.kadmin(f"delprinc -force {kdc.principal('gone')}")
    keeper = TicketKeeper(KerberosOptions(principal=kdc.principal("gone"), keytab=str(keytab),
                                          ccache=str(tmp_path / "cc"), renew_s=600))
    log = kdc.root / "kdc.log"

    def asked() -> int:  # the KDC's AS requests for this principal
        return sum(1 for line in log.read_text().splitlines()
                   if "AS_REQ" in line and kdc.principal("gone") in line)

    with pytest.raises(StorageError, match="no valid Kerberos ticket"):
        keeper.ensure(1000.0)
    tried = asked()
    assert tried >= 1
    with pytest.raises(StorageError):  # within the retry pause: no kinit at all
        keeper.ensure(1001.0)
    assert asked() == tried
    with pytest.raises(StorageError):  # after it: asked again
        keeper.ensure(1031.0)
    assert asked() > tried
    assert not (tmp_path / "cc").exists()


def _acceptor(keytab: Path):  # the NameNode's side of SPNEGO, with its service key
    creds = gssapi.Credentials(usage="accept", store={"keytab": str(keytab)})

    def accept(token: bytes) -> str:
        ctx = gssapi.SecurityContext(creds=creds, usage="accept")
        ctx.step(token)
        if not ctx.complete:
            raise ValueError("negotiation not complete after one token")
        return str(ctx.initiator_name)

    return accept


def test_webhdfs_authenticates_every_namenode_call_with_spnego(
        kdc: Kdc, garm: Path, webhdfs_server: WebHdfsServer) -> None:
    webhdfs_server.spnego = _acceptor(kdc.add("HTTP/127.0.0.1"))
    root = f"webhdfs://127.0.0.1:{webhdfs_server.server_address[1]}/out"
    plain = open_storage(root, "inst-a")
    with pytest.raises(StorageError):
        plain.list("")  # the server refuses a call without a ticket
    plain.close()
    assert webhdfs_server.principals == []

    options = from_output(OutputConfig(hdfs_kerberos=True, hdfs_user="etl",
                                       hdfs_kerberos_principal=kdc.principal("garm"),
                                       hdfs_kerberos_keytab=str(garm)))
    storage = open_storage(root, "inst-a", options)
    storage.put_exclusive("fs/day=2026-11-01/a.parquet", b"rows")
    assert storage.read("fs/day=2026-11-01/a.parquet") == b"rows"
    assert [e.name for e in storage.list("fs")] == ["day=2026-11-01"]
    storage.close()
    calls = [op for method, op, _ in webhdfs_server.faults.requests if op]
    assert len(webhdfs_server.principals) >= 5
    assert set(webhdfs_server.principals) == {kdc.principal("garm")}
    # one negotiation: the calls after it came in with the cookie it was answered with
    assert webhdfs_server.negotiations == [kdc.principal("garm")]
    assert {"CREATE", "RENAME", "OPEN", "LISTSTATUS"} <= set(calls)
    assert os.environ["KRB5CCNAME"] == kdc.env["KRB5CCNAME"]  # the process's cache untouched


def test_the_command_line_reaches_a_kerberized_webhdfs_from_the_environment(
        kdc: Kdc, garm: Path, webhdfs_server: WebHdfsServer, tmp_path: Path) -> None:
    """A real garmexport process, configured by GARMEXPORT_OUTPUT_* variables only."""
    webhdfs_server.spnego = _acceptor(kdc.add("HTTP/127.0.0.1"))
    env = {**{k: v for k, v in kdc.env.items() if not k.startswith("GARMEXPORT_")},
           "GARMEXPORT_OUTPUT_ROOT": f"webhdfs://127.0.0.1:{webhdfs_server.server_address[1]}/out",
           "GARMEXPORT_OUTPUT_HDFS_KERBEROS": "true",
           "GARMEXPORT_OUTPUT_HDFS_KERBEROS_PRINCIPAL": kdc.principal("garm"),
           "GARMEXPORT_OUTPUT_HDFS_KERBEROS_KEYTAB": str(garm),
           "GARMEXPORT_OUTPUT_HDFS_KERBEROS_RENEW_S": "60"}
    repo = Path(__file__).resolve().parents[2]
    # offsets reads a root, never makes one: it must exist in HDFS's namespace
    (Path(webhdfs_server.data_dir) / "out").mkdir(exist_ok=True)
    res = subprocess.run([sys.executable, "-m", "garmexport", "offsets", "show", "--no-broker",
                          "--json"], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert webhdfs_server.principals and set(webhdfs_server.principals) == {
        kdc.principal("garm")}
