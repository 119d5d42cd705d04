"""A real MIT Kerberos KDC on loopback, in a temp directory, for the Kerberos tests.

``Kdc(dir).start()`` writes ``krb5.conf`` and ``kdc.conf`` for the realm
``GARMEXPORT.TEST``, creates the database (``kdb5_util create -s``), adds the principals
with ``kadmin.local`` and exports their keys to keytabs (``ktadd``), then runs ``krb5kdc``
in the foreground on a free port. Tickets are renewable (7 days). ``env`` is what a process
needs to use this realm (``KRB5_CONFIG``, a private default ticket cache, no replay cache
files). Needs Debian's ``krb5-kdc``, ``krb5-admin-server`` (kadmin.local) and ``krb5-user``
(kinit, klist): :func:`missing` names what is absent.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
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


class Kdc:
    def __init__(self, root: Path) -> None:
        self.root = root
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
        return f"{name}@{REALM}"

    def start(self) -> Kdc:
        self.krb5_conf.write_text(f"""[libdefaults]
    default_realm = {REALM}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    renew_lifetime = 7d
[realms]
    {REALM} = {{
        kdc = 127.0.0.1:{self.port}
    }}
""")
        (self.root / "kdc.conf").write_text(f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}
[realms]
    {REALM} = {{
        database_name = {self.root / 'principal'}
        key_stash_file = {self.root / 'stash'}
        acl_file = {self.root / 'kadm5.acl'}
        max_life = 1d
        max_renewable_life = 7d
    }}
[logging]
    kdc = FILE:{self.root / 'kdc.log'}
""")
        self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", "master-password")
        self.kadmin(f"modprinc -maxrenewlife 7days krbtgt/{REALM}@{REALM}")
        self._proc = subprocess.Popen([which("krb5kdc") or "krb5kdc", "-n", "-r", REALM],
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

    def kadmin(self, query: str) -> None:
        self._run("kadmin.local", "-r", REALM, "-q", query)

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
