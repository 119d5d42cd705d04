"""A real MIT Kerberos KDC on loopback, in a temp directory, for the Kerberos tests.

``Kdc(dir).start()`` writes ``krb5.conf`` and ``kdc.conf`` for the realm
``GARMEXPORT.TEST`` (``Kdc(dir, realm)``: another), creates the database (``kdb5_util
create -s``), adds the principals with ``kadmin.local`` and exports their keys to keytabs
(``ktadd``), then runs ``krb5kdc`` in the foreground on a free port. Tickets are renewable (7 days). ``env`` is what a process
needs to use this realm (``KRB5_CONFIG``, a private default ticket cache, no replay cache
files). Needs Debian's ``krb5-kdc``, ``krb5-admin-server`` (kadmin.local) and ``krb5-user``
(kinit, klist): :func:`missing` names what is absent.

Cross-realm trust: ``server.trust(client)`` adds ``krbtgt/SERVER@CLIENT`` to both KDCs with
one password, so both hold the same keys (same name, hence same salt; kvno 1 in both):
users of the client realm get tickets for services of the server realm, not the reverse.
:func:`krb5_conf` writes one ``krb5.conf`` naming several realms, for the processes that
use them together: each realm's KDC, ``[domain_realm]`` mapping the service hosts to their
realm (without it a client asks for a service in its default realm; MIT maps host names
only, never a numeric address) and ``[capaths]`` naming each trust as a direct path (MIT
1.20 finds a direct trust without it; written to say what the trusts are).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

REALM = "GARMEXPORT.TEST"
TOOLS = {"krb5kdc": "krb5-kdc", "kdb5_util": "krb5-kdc", "kadmin.local": "krb5-admin-server",
         "kinit": "krb5-user", "klist": "krb5-user"}
SBIN = ("/usr/sbin", "/sbin")


def which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path=os.pathsep.join(SBIN))


def missing() -> list[str]:
    """The Debian packages whose tools are not installed."""
    return sorted({pkg for tool, pkg in TOOLS.items() if which(tool) is None})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _libdefaults(default_realm: str) -> str:
    return f"""[libdefaults]
    default_realm = {default_realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    renew_lifetime = 7d
"""


def krb5_conf(path: Path, kdcs: Sequence[Kdc], *,
              hosts: Mapping[str, str] | None = None) -> Path:
    """A ``krb5.conf`` at ``path`` naming the realms of ``kdcs`` (the first is the default
    realm), ``hosts`` (host name -> realm) as ``[domain_realm]``, and the trusts made with
    :meth:`Kdc.trust` as direct ``[capaths]``."""
    realms = "".join(f"    {k.realm} = {{\n        kdc = 127.0.0.1:{k.port}\n    }}\n"
                     for k in kdcs)
    mapping = "".join(f"    {host} = {realm}\n" for host, realm in (hosts or {}).items())
    paths = "".join(f"    {client} = {{\n        {k.realm} = .\n    }}\n"
                    for k in kdcs for client in sorted(k.trusted_by))
    path.write_text(f"{_libdefaults(kdcs[0].realm)}[realms]\n{realms}"
                    + (f"[domain_realm]\n{mapping}" if mapping else "")
                    + (f"[capaths]\n{paths}" if paths else ""))
    return path


class Kdc:
    def __init__(self, root: Path, realm: str = REALM) -> None:
        self.root = root
        self.realm = realm
        self.trusted_by: set[str] = set()  # the realms whose users this realm's services take
        self.port = _free_port()
        self.krb5_conf = root / "krb5.conf"
        self.env = {
            **os.environ, "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(root / "kdc.conf"),
            "KRB5CCNAME": f"FILE:{root / 'default-ccache'}",  # never the user's own cache
            "KRB5RCACHETYPE": "none",
        }
        self._proc: subprocess.Popen[bytes] | None = None

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"

    def start(self) -> Kdc:
        krb5_conf(self.krb5_conf, [self])
        (self.root / "kdc.conf").write_text(f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}
[realms]
    {self.realm} = {{
        database_name = {self.root / 'principal'}
        key_stash_file = {self.root / 'stash'}
        acl_file = {self.root / 'kadm5.acl'}
        max_life = 1d
        max_renewable_life = 7d
    }}
[logging]
    kdc = FILE:{self.root / 'kdc.log'}
""")
        self._run("kdb5_util", "create", "-s", "-r", self.realm, "-P", "master-password")
        self.kadmin(f"modprinc -maxrenewlife 7days krbtgt/{self.realm}@{self.realm}")
        self._proc = subprocess.Popen([which("krb5kdc") or "krb5kdc", "-n", "-r", self.realm],
                                      env=self.env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"krb5kdc did not start; see {self.root / 'kdc.log'}")
                time.sleep(0.05)

    def add(self, name: str) -> Path:
        """Add principal ``name`` (renewable tickets) with a random key; its keytab."""
        keytab = self.root / (name.replace("/", "_") + ".keytab")
        self.kadmin(f"addprinc -randkey -maxrenewlife 7days {self.principal(name)}")
        self.kadmin(f"ktadd -k {keytab} {self.principal(name)}")
        return keytab

    def trust(self, client: Kdc, password: str = "cross-realm-password") -> str:
        """Let users of ``client``'s realm use this realm's services (one way): the
        principal ``krbtgt/THIS@CLIENT``, added to both KDCs with ``password``; its name."""
        name = f"krbtgt/{self.realm}@{client.realm}"
        for kdc in (self, client):
            kdc.kadmin(f"addprinc -pw {password} -maxrenewlife 7days {name}")
        self.trusted_by.add(client.realm)
        return name

    def kadmin(self, query: str) -> None:
        self._run("kadmin.local", "-r", self.realm, "-q", query)

    def _run(self, tool: str, *args: str) -> str:
        res = subprocess.run([which(tool) or tool, *args], env=self.env, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)}: {res.stderr.strip()}")
        return res.stdout

    def klist(self, ccache: str) -> str:
        return self._run("klist", "-c", ccache)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
