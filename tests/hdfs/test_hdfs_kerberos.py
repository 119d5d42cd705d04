"""Kerberos against a real secure HDFS: Hadoop's NameNode and DataNodes with security on.

A real MIT KDC (tests/kdc.py) and a MiniDFSCluster (tests/hdfs_cluster.py) that logs in to
it: ``hadoop.security.authentication = kerberos``, the NameNode and DataNodes as
``hdfs/localhost`` and their web servers as ``HTTP/127.0.0.1`` from one keytab, block
access tokens on. What it takes, found here for Hadoop 3.5.0:

- ``hadoop.http.authentication.type = kerberos``: with only ``dfs.web.authentication.*``
  set, WebHDFS lets every call through unauthenticated and then fails it with a 403
  ("Security enabled but user not authenticated by filter");
- DataNodes on unprivileged ports need either SASL on data transfer, which needs
  ``dfs.http.policy = HTTPS_ONLY`` and TLS key stores (so ``swebhdfs://`` only), or
  ``ignore.secure.ports.for.testing = true``, which is what runs here: WebHDFS over plain
  HTTP, SPNEGO to the NameNode, delegation tokens to the DataNodes;
- the JVM finds the KDC through ``-Djava.security.krb5.conf`` (Java reads no KRB5_CONFIG);
- the launcher needs no login of its own: the NameNode's and DataNodes' keytab logins
  make ``hdfs`` the process's user, the superuser that makes the tests' directories.

The cluster is an HA pair (two NameNodes, the first active) and every root names both, as
a production HA cluster's would: each NameNode negotiates SPNEGO (and signs cookies) on
its own, the DataNodes check delegation tokens issued for the nameservice, and a
failover is followed through a negotiation with the new active one.

The cookie validity is cut to a few seconds (``hadoop.http.authentication.token.validity``,
10 h by default) so that a test sees the NameNode ask again, with a ticket renewed since.

Runs in ``tox -e hdfs-kerberos`` (GARMEXPORT_REQUIRE_HDFS and GARMEXPORT_REQUIRE_KERBEROS:
what is missing fails there); skipped, loudly, elsewhere.
"""

from __future__ import annotations

import base64
import calendar
import logging
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
import requests

from garmexport.errors import StorageDenied, StorageError
from garmexport.pipeline.recovery import read_partition_state
from garmexport.settings.config import OutputConfig
from garmexport.storage.base import Storage
from garmexport.storage.open import open_storage
from garmexport.storage.options import from_output
from tests.broker import Broker
from tests.hdfs_cluster import HdfsUnavailable, MiniHdfs, mini_hdfs
from tests.integration.harness import (
    Exporter, assert_exact, exporter_env, exporter_runs, produce_in_background, topic_ends,
)
from tests.integration.test_cli_operator import garmexport, lines
from tests.hdfs.secure_gate import skip_unless_secure
from tests.kdc import REALM, Kdc
from tests.storage.conftest import Backend

skip_unless_secure()

# the storage contract, checked against the secure cluster through the fixtures below
from tests.storage.test_conformance import REMOTE_CASES  # noqa: E402

globals().update(REMOTE_CASES)  # collected here again

# one secure cluster for the module: its tests on one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("hdfs-kerberos")

COOKIE_VALIDITY_S = 3
SHORT_LIFE_S = 5  # the ticket lifetime of the principal `short`


@dataclass
class Secure:
    kdc: Kdc
    cluster: MiniHdfs
    keytabs: dict[str, Path]  # user principal (short name) -> its keytab

    def principal(self, name: str) -> str:
        return self.kdc.principal(name)

    def output(self, name: str = "garm", **more: object) -> dict[str, object]:
        return {"hdfs_kerberos": True, "hdfs_kerberos_principal": self.principal(name),
                "hdfs_kerberos_keytab": str(self.keytabs[name]), **more}

    def root(self, owner: str = "garm") -> str:
        """A fresh directory owned by ``owner``; the ``webhdfs://`` URI of a root in it."""
        base = f"/t/{uuid.uuid4().hex[:12]}"
        self.cluster.mkdir(base, owner)
        return self.cluster.webhdfs_uri(f"{base}/out")


def realm(root: Path) -> tuple[Kdc, Path, dict[str, Path]]:
    """A running KDC in ``root``; the service keytab (``hdfs/localhost`` for the NameNode
    and DataNodes, ``HTTP/127.0.0.1`` for their web servers) and the users' keytabs."""
    kdc = Kdc(root).start()
    service = kdc.root / "service.keytab"  # the NameNode's, DataNodes' and web servers' keys
    for name in ("hdfs/localhost", "HTTP/127.0.0.1"):
        kdc.kadmin(f"addprinc -randkey {kdc.principal(name)}")
        kdc.kadmin(f"ktadd -k {service} {kdc.principal(name)}")
    keytabs = {name: kdc.add(name) for name in ("garm", "spark")}
    # tickets of SHORT_LIFE_S seconds, not renewable: garmexport renews them from the keytab
    kdc.kadmin(f"addprinc -randkey -maxlife 0:00:{SHORT_LIFE_S:02d} -maxrenewlife 0 "
               f"{kdc.principal('short')}")
    keytabs["short"] = kdc.root / "short.keytab"
    kdc.kadmin(f"ktadd -k {keytabs['short']} {kdc.principal('short')}")
    return kdc, service, keytabs


def security_conf(service: Path) -> dict[str, str]:
    """Kerberos on for the NameNodes, DataNodes and their web servers (keys in ``service``),
    block access tokens on; without what the DataNodes' ports need (see the docstring)."""
    return {
        "hadoop.security.authentication": "kerberos",
        "dfs.block.access.token.enable": "true",
        "dfs.namenode.kerberos.principal": f"hdfs/localhost@{REALM}",
        "dfs.namenode.keytab.file": str(service),
        "dfs.datanode.kerberos.principal": f"hdfs/localhost@{REALM}",
        "dfs.datanode.keytab.file": str(service),
        "dfs.web.authentication.kerberos.principal": f"HTTP/127.0.0.1@{REALM}",
        "dfs.web.authentication.kerberos.keytab": str(service),
        "hadoop.http.authentication.type": "kerberos",
        "hadoop.http.authentication.kerberos.principal": f"HTTP/127.0.0.1@{REALM}",
        "hadoop.http.authentication.kerberos.keytab": str(service),
        "hadoop.http.authentication.token.validity": str(COOKIE_VALIDITY_S),
        # garm may act for etl (doas); spark may not
        "hadoop.proxyuser.garm.hosts": "*",
        "hadoop.proxyuser.garm.users": "etl",
    }


@pytest.fixture(scope="module")
def secure_hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    kdc, service, keytabs = realm(tmp_path_factory.mktemp("kdc"))
    conf = {
        **security_conf(service),
        "ignore.secure.ports.for.testing": "true",
        # the DataNodes reach the nameservice a token names (as in test_hdfs_faults.py)
        "dfs.client.failover.proxy.provider.minidfs-ns":
            "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider",
    }
    with pytest.MonkeyPatch.context() as mp:
        for key in ("KRB5_CONFIG", "KRB5CCNAME", "KRB5RCACHETYPE"):
            mp.setenv(key, kdc.env[key])  # this process and its children use the test realm
        try:
            with mini_hdfs(conf=conf, ha=True,
                           jvm_args=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"]) as cluster:
                yield Secure(kdc, cluster, keytabs)
        except HdfsUnavailable as exc:
            pytest.fail(f"a secure HDFS cannot start here: {exc}")
        finally:
            kdc.stop()


@pytest.fixture
def storage_backend(secure_hdfs: Secure) -> Iterator[Backend]:
    """The conformance tests' backend: WebHDFS with Kerberos on the secure cluster."""
    root, output = secure_hdfs.root(), secure_hdfs.output()
    storage = open_storage(root, "inst-a", from_output(OutputConfig(**output)))
    try:
        yield Backend(root, output, storage)
    finally:
        storage.close()


@pytest.fixture
def storage(storage_backend: Backend) -> Storage:
    return storage_backend.storage


def kerberized(secure: Secure, root: str, name: str = "garm", **more: object) -> Storage:
    """A WebHDFS storage on ``root`` authenticating as ``name`` from its keytab."""
    output = OutputConfig(**secure.output(name, **more))  # type: ignore[arg-type]
    return open_storage(root, "inst-a", from_output(output))


class Calls:
    """The NameNode calls of one storage's session: those that took a SPNEGO negotiation
    (a 401 first, in the answer's history) and those the cookie alone let in."""

    def __init__(self, storage: Storage, namenode_port: int) -> None:
        self.port = namenode_port
        self.seen: list[tuple[float, bool, bool]] = []  # (when, negotiated, sent the cookie)
        self._lock = threading.Lock()
        storage._client._session.hooks["response"].append(self._hook)  # type: ignore[attr-defined]

    def _hook(self, res: requests.Response, **_: object) -> None:
        if urlsplit(res.url).port != self.port:
            return  # a DataNode
        negotiated = any(r.status_code == 401 for r in res.history)
        cookie = "hadoop.auth=" in (res.request.headers.get("Cookie") or "")
        with self._lock:
            self.seen.append((time.time(), negotiated, cookie))

    def negotiations(self, since: float = 0.0) -> int:
        return sum(1 for t, negotiated, _ in self.seen if negotiated and t >= since)

    def by_cookie(self) -> int:
        return sum(1 for _, negotiated, cookie in self.seen if cookie and not negotiated)


def test_after_one_negotiation_the_namenode_lets_calls_in_by_its_cookie(
        secure_hdfs: Secure, caplog: pytest.LogCaptureFixture) -> None:
    """Its answers then carry no SPNEGO token, and none is asked for: a missing file's 404
    is no "mutual authentication unavailable" error in the log."""
    caplog.set_level(logging.INFO)
    storage = kerberized(secure_hdfs, secure_hdfs.root())
    calls = Calls(storage, secure_hdfs.cluster.http_ports[0])
    started = time.monotonic()
    for i in range(5):
        storage.put_exclusive(f"fs/day=2026-11-01/{i}.parquet", b"rows %d" % i)
    assert [e.name for e in storage.list("fs/day=2026-11-01")] == [f"{i}.parquet"
                                                                     for i in range(5)]
    assert not storage.exists("fs/day=2026-11-01/missing.parquet")
    with pytest.raises(FileNotFoundError):
        storage.read("fs/missing")
    elapsed = time.monotonic() - started
    storage.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    namenode_calls = len(calls.seen)
    assert namenode_calls >= 16  # CREATE, GETFILESTATUS, RENAME (and MKDIRS) per file
    # one negotiation, and one more each time the cookie expired (COOKIE_VALIDITY_S)
    assert 1 <= calls.negotiations() <= 1 + int(elapsed / COOKIE_VALIDITY_S)
    assert calls.by_cookie() == namenode_calls - calls.negotiations()
    cookies = [c for c in storage._client._session.cookies  # type: ignore[attr-defined]
               if c.name == "hadoop.auth"]
    assert cookies and f"p={secure_hdfs.principal('garm')}" in (cookies[0].value or "")


def _with(url: str, param: str, value: str | None) -> str:
    """``url`` with query parameter ``param`` set to ``value`` (None: dropped)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != param]
    if value is not None:
        query.append((param, value))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _forged(token: str) -> str:
    """A delegation token (URL form) with one byte of its password changed."""
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    at = 1 + raw[0]  # a one-byte length, the identifier, then the password's length
    assert raw[0] < 128 and raw[at] < 128, "lengths of more than one byte"
    raw[at + 1] ^= 0xFF
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def test_the_datanode_lets_in_only_the_delegation_token_of_the_namenodes_redirect(
        secure_hdfs: Secure) -> None:
    """The NameNode authenticates the client (SPNEGO) and hands the DataNode its redirect
    with a delegation token; the DataNode needs nothing else, and nothing less. Each
    DataNode request is sent on a connection of its own."""
    root = secure_hdfs.root()
    storage = kerberized(secure_hdfs, root)
    storage.put_exclusive("f", b"data")
    session: requests.Session = storage._client._session  # type: ignore[attr-defined]
    nn = f"http://127.0.0.1:{secure_hdfs.cluster.http_ports[0]}/webhdfs/v1{urlsplit(root).path}"
    redirect = session.get(f"{nn}/f", params={"op": "OPEN"}, allow_redirects=False)
    assert redirect.status_code == 307
    location = redirect.headers["Location"]
    token = dict(parse_qsl(urlsplit(location).query)).get("delegation")
    assert token and urlsplit(location).port != secure_hdfs.cluster.http_ports[0]  # a DataNode
    # no Kerberos, no cookie: only what the URL carries. The forged token first: once a
    # DataNode has taken a token, it lets in copies with another password as well
    for bad in (_with(location, "delegation", _forged(token)),
                _with(location, "delegation", None)):
        refused = requests.get(bad, timeout=30)
        assert refused.status_code == 403 and "data" != refused.text, refused.text[:300]
    assert requests.get(location, timeout=30).content == b"data"
    assert requests.get(f"{nn}/f", params={"op": "OPEN"}, timeout=30).status_code == 401
    # a CREATE's data goes to a DataNode the same way
    redirect = session.put(f"{nn}/g", params={"op": "CREATE"}, allow_redirects=False)
    create = redirect.headers["Location"]
    assert requests.put(_with(create, "delegation", None), data=b"x",
                        timeout=30).status_code == 403
    assert not storage.exists("g")
    assert requests.put(create, data=b"x", timeout=30).status_code == 201
    assert storage.read("g") == b"x"
    storage.close()


def _http_tickets(kdc: Kdc, principal: str) -> list[int]:
    """Authtimes of the TGTs ``principal`` got HTTP service tickets with (the KDC's log)."""
    return [int(t) for t in re.findall(
        rf"TGS_REQ .*ISSUE: authtime (\d+),.* {re.escape(principal)} for HTTP/",
        (kdc.root / "kdc.log").read_text())]


def test_writes_go_on_across_ticket_expiry_with_tickets_renewed_from_the_keytab(
        secure_hdfs: Secure, tmp_path: Path) -> None:
    """Tickets of 5 s: the keytab's keeper renews at 80 % of their life and every write
    succeeds past several ends; the NameNode, whose cookie expires every few seconds,
    negotiates again with the renewed ticket. A cache that cannot be renewed (kinit -R of
    a ticket that is not renewable) stops at its ticket's end with a StorageError."""
    short = secure_hdfs.principal("short")
    renewed = kerberized(secure_hdfs, secure_hdfs.root(owner="short"), "short")
    calls = Calls(renewed, secure_hdfs.cluster.http_ports[0])
    outside = f"FILE:{tmp_path / 'outside-cc'}"
    subprocess.run(["kinit", "-kt", str(secure_hdfs.keytabs["short"]), "-c", outside, short],
                   check=True, capture_output=True)
    ends_at = time.time() + SHORT_LIFE_S  # the outside ticket's end, give or take a second
    stuck = open_storage(secure_hdfs.root(owner="short"), "inst-b", from_output(OutputConfig(
        hdfs_kerberos=True, hdfs_kerberos_ccache=outside.removeprefix("FILE:"))))
    first_tgt = int(time.time())
    written, stuck_ok, stuck_errors = 0, [], []
    while time.time() < ends_at + SHORT_LIFE_S:
        renewed.put_exclusive(f"fs/{written}", b"x")
        written += 1
        try:
            stuck.put_exclusive(f"fs/{len(stuck_ok)}", b"y")
            stuck_ok.append(time.time())
        except StorageError as exc:
            stuck_errors.append((time.time(), str(exc)))
        time.sleep(0.2)
    assert written == len(renewed.list("fs")) and written >= 10
    keeper = renewed._keeper  # type: ignore[attr-defined]
    assert keeper.generation >= 3  # renewed at least twice in 2 lifetimes
    # the NameNode negotiated again after a renewal: with a TGT from later than the first
    assert calls.negotiations() >= 3
    assert max(_http_tickets(secure_hdfs.kdc, short)) >= first_tgt + SHORT_LIFE_S - 2
    # the cache that cannot be renewed: fine until its ticket ends, refused after, loudly
    assert stuck_ok and max(stuck_ok) < ends_at + 2
    assert stuck_errors and min(t for t, _ in stuck_errors) > ends_at - 2
    assert all("no valid Kerberos ticket" in why and "outside-cc" in why
               for _, why in stuck_errors), stuck_errors[:2]
    renewed.close()
    stuck.close()


def test_a_proxy_user_writes_as_itself_where_the_namenode_allows_it(secure_hdfs: Secure) -> None:
    """``hdfs_user`` with Kerberos is ``doas``: the files are the proxy user's, if the
    cluster's hadoop.proxyuser.* settings let the principal act for it; else a refusal of
    this user (StorageDenied, a configuration error at start-up) that names both."""
    root = secure_hdfs.root(owner="etl")
    storage = kerberized(secure_hdfs, root, "garm", hdfs_user="etl")
    storage.put_exclusive("fs/a", b"as etl")
    session: requests.Session = storage._client._session  # type: ignore[attr-defined]
    nn = f"http://127.0.0.1:{secure_hdfs.cluster.http_ports[0]}/webhdfs/v1{urlsplit(root).path}"
    status = session.get(f"{nn}/fs/a", params={"op": "GETFILESTATUS"}).json()["FileStatus"]
    assert status["owner"] == "etl"
    storage.close()

    refused = kerberized(secure_hdfs, root, "spark", hdfs_user="etl")
    with pytest.raises(StorageDenied, match="User: spark is not allowed to impersonate etl"):
        refused.put_exclusive("fs/b", b"as spark")
    refused.close()


def test_a_proxy_user_the_principal_may_not_act_for_is_one_line_and_exit_2_at_start_up(
        secure_hdfs: Secure) -> None:
    """Before, the NameNode's refusal of the doas (an AuthorizationException) was a
    StorageError like an outage's: ``run`` exited 1 telling to check that the store is up."""
    root = secure_hdfs.root(owner="etl")
    # no broker listens: the root is checked before the exporter reaches for one
    env = exporter_env("127.0.0.1:9", "t", root, LOG_FORMAT="text", OUTPUT_HDFS_USER="etl",
                       OUTPUT_HDFS_KERBEROS="true",
                       OUTPUT_HDFS_KERBEROS_PRINCIPAL=secure_hdfs.principal("spark"),
                       OUTPUT_HDFS_KERBEROS_KEYTAB=str(secure_hdfs.keytabs["spark"]))
    code, err, seconds = garmexport(env, "run", timeout_s=60)
    print(f"exit {code} after {seconds:.1f} s: {err}")
    assert code == 2, err
    # one error line (the ticket got from the keytab is logged before it, at INFO)
    errors = [line for line in lines(err) if " INFO " not in line]
    assert "Traceback" not in err and len(errors) == 1, err
    for said in ("output.root", repr(root), "User: spark is not allowed to impersonate etl",
                 "hadoop.proxyuser", "output.hdfs_user"):
        assert said in err, err
    assert seconds < 30, seconds


def test_a_failover_is_followed_through_a_negotiation_with_the_new_active_namenode(
        secure_hdfs: Secure) -> None:
    """The first write after a failover goes to the NameNode that was standby: its SPNEGO
    negotiation (the other one's cookie is not its own), its redirect, its delegation token
    at the DataNode; and back after the failback."""
    root = secure_hdfs.root()
    assert root.count("127.0.0.1:") == 2, root
    storage = kerberized(secure_hdfs, root)
    calls = Calls(storage, secure_hdfs.cluster.http_ports[1])
    try:
        storage.put_exclusive("fs/before", b"to the first")
        assert calls.seen == []  # the first NameNode, active, answered
        secure_hdfs.cluster.command("failover 0 1")
        try:
            storage.put_exclusive("fs/after", b"to the second")
            assert storage.read("fs/after") == b"to the second"
            assert storage.read("fs/before") == b"to the first"
            assert calls.negotiations() >= 1, calls.seen
        finally:
            secure_hdfs.cluster.command("failover 1 0")
        storage.put_exclusive("fs/back", b"to the first again")
        assert sorted(e.name for e in storage.list("fs")) == ["after", "back", "before"]
    finally:
        storage.close()


def test_a_storage_without_kerberos_is_told_the_namenode_asks_for_it(
        secure_hdfs: Secure) -> None:
    """One call, one 401 (the NameNode asks for SPNEGO): a StorageError that names the
    setting, not a transient error retried within the backend."""
    plain = open_storage(secure_hdfs.root(), "inst-a", from_output(OutputConfig(hdfs_user="garm")))
    answers: list[int] = []
    plain._client._session.hooks["response"].insert(  # type: ignore[attr-defined]
        0, lambda res, **_: answers.append(res.status_code))
    with pytest.raises(StorageError, match="asks for Kerberos .*output.hdfs_kerberos = true"):
        plain.list("")
    assert answers == [401]
    plain.close()


def test_a_service_principal_the_kdc_does_not_know_is_named_in_the_error(
        secure_hdfs: Secure) -> None:
    root = secure_hdfs.root()
    # `localhost` in the URI: SPNEGO asks the KDC for HTTP/localhost, which it does not know
    wrong = kerberized(secure_hdfs, root.replace("127.0.0.1", "localhost"))
    with pytest.raises(StorageError, match="HTTP/localhost@GARMEXPORT.TEST not found"):
        wrong.list("")
    wrong.close()


def _tickets_per_cache(run: Exporter) -> dict[str, list[str]]:
    """The ends ("until") of the tickets the exporter logged getting, per ticket cache."""
    out: dict[str, list[str]] = {}
    for doc in run.events():
        found = re.match(r"Kerberos ticket renewed in (\S+) until (\S+)$", doc.get("event", ""))
        if found:
            out.setdefault(found[1], []).append(found[2])
    return out


def test_a_garmexport_process_exports_a_topic_exactly_once_through_ticket_expiries(
        secure_hdfs: Secure, broker: Broker, tmp_path: Path) -> None:
    """``garmexport run`` configured from GARMEXPORT_OUTPUT_* alone, with tickets of 5 s;
    records stream in for 8 s once it runs, so the last of them are written after its first
    ticket has ended: it renews from its keytab as it goes, the NameNode negotiates again
    each time its cookie ends, and verify (Kerberos too) finds every record exactly once."""
    topic = broker.new_topic(partitions=2)
    env = exporter_env(broker.bootstrap, topic, secure_hdfs.root(owner="short"),
                       OUTPUT_HDFS_KERBEROS="true",
                       OUTPUT_HDFS_KERBEROS_PRINCIPAL=secure_hdfs.principal("short"),
                       OUTPUT_HDFS_KERBEROS_KEYTAB=str(secure_hdfs.keytabs["short"]))
    probe = kerberized(secure_hdfs, env["GARMEXPORT_OUTPUT_ROOT"])  # garm: reads, never writes
    with exporter_runs() as runs:
        run = Exporter(env, tmp_path, "secure")
        runs.append(run)
        run.wait_event("assigned", timeout_s=120)
        feeder, report = produce_in_background(broker.bootstrap, topic, 800, partitions=2,
                                               days=1, rate=100)
        feeder.join(120)
        fed_at = time.time()
        assert report.get("failed") == 0, report
        ends = topic_ends(broker.bootstrap, topic)
        deadline = time.monotonic() + 120
        while True:
            upto = {p: read_partition_state(probe, "local", topic, p).state.seek()
                    for p in ends}
            if all(upto[p] is not None and upto[p] >= end for p, end in ends.items()):
                break
            run.check_alive()
            assert time.monotonic() < deadline, f"not caught up: {upto}, ends {ends}"
            time.sleep(1.0)
        assert run.terminate() == 0, run.tail()
    probe.close()
    # the exporter's writer: its first ticket ended before the last records came, and it
    # got new ones from the keytab as it went
    ends_of_tickets = max(_tickets_per_cache(run).values(), key=len)
    first_end = calendar.timegm(time.strptime(ends_of_tickets[0], "%Y-%m-%dT%H:%M:%SZ"))
    assert fed_at > first_end + 1, (ends_of_tickets, fed_at)
    assert len(ends_of_tickets) >= 3, ends_of_tickets
    assert_exact(env, ends)
