"""Kerberos for WebHDFS: a ticket kept fresh in a ticket cache, and SPNEGO from it.

Two ways to hold a ticket (``[output]`` keys ``hdfs_kerberos_*``):

- **keytab** (``keytab`` and ``principal``): garmexport runs ``kinit -kt KEYTAB -c CACHE
  PRINCIPAL`` into a private ticket cache (a file in a fresh 0700 directory of this
  process, unless ``ccache`` names one) and renews by fetching a new ticket from the
  keytab. Nothing else needs to run.
- **ticket cache** (no keytab): a cache that something else fills (``kinit``, ``k5start``,
  the cluster's agent): ``ccache``, else the default (``KRB5CCNAME``). garmexport renews
  it with ``kinit -R``, which works for renewable tickets; a failed renewal is logged and
  the ticket is used until it ends.

When to renew is :mod:`.ticket_renewal`. A request the NameNode asks to authenticate
negotiates SPNEGO through requests-gssapi, from credentials read out of that cache
explicitly (the process's ``KRB5CCNAME`` is never changed); the NameNode's ``hadoop.auth``
cookie then lets the next requests in without one (:class:`SpnegoAuth`). A request made
when no usable ticket can be had raises StorageError, which the exporter's back-off retries.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import requests

from garmexport.errors import ConfigError, StorageDenied, StorageError
from garmexport.storage.options import KerberosOptions
from garmexport.storage.ticket_renewal import Ticket, renewal_due, usable

log = logging.getLogger(__name__)
KINIT_TIMEOUT_S = 30.0


class TicketKeeper:
    """The ticket of one process; :meth:`ensure` before each use (thread-safe)."""

    def __init__(self, options: KerberosOptions, *,
                 clock: Callable[[], float] = time.time) -> None:
        if options.keytab and not options.principal:
            raise ConfigError("output.hdfs_kerberos_keytab needs output.hdfs_kerberos_principal "
                              "(the principal whose key the keytab holds)")
        self.options, self._clock = options, clock
        self._dir: str | None = None
        if options.ccache:
            self.ccache: str | None = (options.ccache if ":" in options.ccache
                                       else f"FILE:{options.ccache}")
        elif options.keytab:
            self._dir = tempfile.mkdtemp(prefix="garmexport-krb5-")
            self.ccache = f"FILE:{self._dir}/ccache"
        else:
            self.ccache = None  # the default cache
        self.ticket: Ticket | None = None
        self._failed_at: float | None = None
        self.generation = 0  # changes with every new or renewed ticket
        self._lock = threading.Lock()

    def ensure(self, now_s: float | None = None) -> int:
        """Renew if due; the ticket's generation. StorageError if no usable ticket."""
        with self._lock:
            now = self._clock() if now_s is None else now_s
            if renewal_due(now, self.ticket, self.options.renew_s, self._failed_at):
                self._renew(now)
            if not usable(now, self.ticket):
                where = self.ccache or "the default cache"
                raise StorageError(f"no valid Kerberos ticket in {where} (see the log for why)")
            return self.generation

    def _renew(self, now: float) -> None:
        first_look = self.ticket is None and not self.options.keytab
        try:
            if not first_look:  # an outside cache is read as it is first, then renewed
                self.kinit()
            self.ticket = Ticket(now, now + self.credentials().lifetime)
        except (OSError, subprocess.SubprocessError, _gss_error()) as exc:
            self._failed_at = now
            log.warning("Kerberos ticket not renewed (%s): %s", self.ccache or "default cache",
                        _one_line(exc))
            return
        self._failed_at = None
        self.generation += 1
        log.info("Kerberos ticket %s in %s until %s", "read" if first_look else "renewed",
                 self.ccache or "the default cache",
                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.ticket.expires_s)))

    def kinit(self) -> None:
        """A new ticket from the keytab (with no keytab: the cache's ticket renewed) into
        this keeper's cache; raises what ``kinit`` raised (CalledProcessError with its
        reason, OSError, TimeoutExpired)."""
        o = self.options
        cache = ["-c", self.ccache] if self.ccache else []
        cmd = (["kinit", "-kt", o.keytab, *cache, o.principal] if o.keytab
               else ["kinit", "-R", *cache])
        subprocess.run(cmd, check=True, capture_output=True, text=True,  # type: ignore[arg-type]
                       timeout=KINIT_TIMEOUT_S, stdin=subprocess.DEVNULL)

    def credentials(self) -> Any:
        """GSSAPI initiator credentials from the ticket cache."""
        import gssapi

        name = (gssapi.Name(self.options.principal, gssapi.NameType.kerberos_principal)
                if self.options.principal else None)
        store = {"ccache": self.ccache} if self.ccache else None
        return gssapi.Credentials(name=name, usage="initiate", store=store)

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def check_keytab(options: KerberosOptions | None) -> None:
    """ConfigError, with ``kinit``'s reason in one line, when no ticket can be had from
    ``options.keytab`` (a key the keytab lacks, a KDC that does not answer, a krb5.conf
    that names no such realm). For a process that logs in from the keytab on its own
    (Spark's JVM: ``garmexport compact``), whose failure would be a Java stack trace; the
    ticket goes to a private cache that is removed, never to ``options.ccache``."""
    if options is None or not options.keytab:
        return
    keeper = TicketKeeper(dataclasses.replace(options, ccache=None))
    try:
        keeper.kinit()
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"no Kerberos ticket for {options.principal} from "
                          f"output.hdfs_kerberos_keytab {options.keytab}: "
                          f"{_one_line(exc)}") from exc
    finally:
        keeper.close()


class SpnegoAuth(requests.auth.AuthBase):
    """requests auth: SPNEGO with the keeper's current ticket (fresh credentials after each
    renewal), sent when the NameNode asks for it (a 401 with ``Negotiate``).

    After one negotiation a NameNode answers with its signed ``hadoop.auth`` cookie, which
    the session keeps and sends back: it authenticates the calls that follow, without
    another 401 round trip or GSSAPI work on either side, until it expires
    (``hadoop.http.authentication.token.validity``, 10 h by default) and the NameNode asks
    again. DataNodes need no SPNEGO: the NameNode's redirect to them carries a delegation
    token.

    No mutual authentication: a cookie-authenticated answer has no token to check, and
    requests-gssapi keeps one security context per host, which two threads negotiating at
    once would step with each other's answers. A 401 left after the negotiation raises
    StorageError, with GSSAPI's reason when the token could not even be made (an unknown
    service principal, no ticket, no cross-realm trust), as does the 500 of a NameNode that
    took the token but maps its principal to no user (no ``auth_to_local`` rule for its
    realm): never retried within the backend."""

    def __init__(self, keeper: TicketKeeper) -> None:
        self.keeper = keeper
        self._generation = -1
        self._auth: Any = None

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        generation = self.keeper.ensure()
        if generation != self._generation:
            self._auth = _negotiator(self.keeper.credentials())
            self._generation = generation
        auth = self._auth
        request = auth(request)
        request.register_hook("response", lambda res, **_: _refused(res, auth))
        return request


def _negotiator(creds: Any) -> Any:
    """requests-gssapi's auth, remembering (per thread) why its last token failed."""
    from requests_gssapi import DISABLED, HTTPSPNEGOAuth
    from requests_gssapi.exceptions import SPNEGOExchangeError

    class Negotiator(HTTPSPNEGOAuth):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(creds=creds, mutual_authentication=DISABLED)
            self.last = threading.local()

        def generate_request_header(self, response: Any, host: str,
                                    is_preemptive: bool = False) -> str:
            self.last.failure = None
            try:
                return super().generate_request_header(response, host, is_preemptive)
            except SPNEGOExchangeError as exc:
                self.last.failure = str(exc)
                raise

    return Negotiator()


def _refused(res: requests.Response, auth: Any) -> requests.Response:
    """The final answer of a call: StorageError if it is still a 401, or if it is the 500
    of a NameNode that took the token but maps its principal to no user (no outage that
    a retry outlasts)."""
    where = res.url.partition("?")[0]
    if _unmapped(res):
        said = re.search(r"NoMatchingRule: (No rules applied to [^<\s]+)", res.text)
        raise StorageDenied(  # the cluster refuses this principal: at start-up, exit 2
            f"{res.request.method} {where}: HTTP 500 right after the NameNode accepted the "
            f"Kerberos ticket of {auth.creds.name}"
            + (f" ({said[1]})" if said else "") + ": it maps the principal to no user; the "
            "cluster's hadoop.security.auth_to_local needs a rule for the principal's realm")
    if res.status_code != 401:
        return res
    failure = getattr(auth.last, "failure", None)
    why = (f"no SPNEGO token could be made: {failure}{_untrusted(failure)}" if failure
           else "the server refused the SPNEGO token" if res.history
           else "the server asked for no Negotiate authentication")
    raise StorageError(f"{res.request.method} {where}: HTTP 401, Kerberos authentication "
                       f"failed ({why})")


def _unmapped(res: requests.Response) -> bool:
    """Whether ``res`` is how Hadoop answers a principal that ``hadoop.security.
    auth_to_local`` maps to no short name (a principal of another realm, trusted, that no
    rule names): a 500 to the request that carried the SPNEGO token (after the 401), with
    the server's token back (it took ours) and no RemoteException of WebHDFS's own. Hadoop
    3.5 names the reason ("NoMatchingRule: No rules applied to ...") in an HTML page for a
    GET; a PUT's or DELETE's answer has no body."""
    return (res.status_code == 500 and bool(res.history)
            and res.history[-1].status_code == 401
            and res.headers.get("WWW-Authenticate", "").lower().startswith("negotiate ")
            and "json" not in res.headers.get("Content-Type", ""))


def _untrusted(failure: str) -> str:
    """What GSSAPI's "Server krbtgt/SERVICE@CLIENT not found" means, as a suffix: the
    client's realm has no trust to the service's ("" for other failures)."""
    found = re.search(r"Server krbtgt/([^@\s]+)@(\S+) not found", failure)
    if not found or found[1] == found[2]:
        return ""
    return (f"; no cross-realm trust: realm {found[2]} has no krbtgt/{found[1]}@{found[2]}, "
            f"which the KDCs of both realms need, with the same key, before a principal of "
            f"{found[2]} can use a service of {found[1]}")


def refused_without_kerberos(res: requests.Response, **_: Any) -> requests.Response:
    """Response hook of a WebHDFS session without Kerberos: a 401 (a secure NameNode asking
    for SPNEGO) raises StorageError naming the setting that is missing, not retried within
    the backend; without the hook the ``hdfs`` package logs the HTML page and raises
    "Authentication failure. Check your credentials.", which looked like a blip."""
    if res.status_code != 401:
        return res
    where = res.url.partition("?")[0]
    if "negotiate" in res.headers.get("WWW-Authenticate", "").lower():
        raise StorageError(f"{res.request.method} {where}: HTTP 401, the NameNode asks for "
                           "Kerberos (SPNEGO): set output.hdfs_kerberos = true, with a "
                           "principal and keytab or a ticket cache")
    raise StorageError(f"{res.request.method} {where}: HTTP 401, the NameNode refused the "
                       "request unauthenticated")


def _gss_error() -> type[BaseException]:
    from gssapi.exceptions import GSSError

    return GSSError


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        return f"{' '.join(map(str, exc.cmd[:2]))}: {(exc.stderr or '').strip() or exc.returncode}"
    return " ".join(str(exc).split())
