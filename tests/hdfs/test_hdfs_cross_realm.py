"""Cross-realm Kerberos against a real secure HDFS: the exporter in one realm, the cluster in
another, a one-way trust between them.

Three MIT KDCs on loopback (tests/kdc.py): the cluster's realm ``GARMEXPORT.TEST`` (the
NameNodes' and DataNodes' ``hdfs/localhost``, their web servers' ``HTTP/localhost``), the
users' realm ``CLIENTS.GARMEXPORT.TEST`` (the exporter's ``garm``), which the cluster's
realm trusts (``krbtgt/GARMEXPORT.TEST@CLIENTS.GARMEXPORT.TEST`` in both KDCs, one
password), and ``STRAY.GARMEXPORT.TEST``, trusted by nobody at first. Two ``krb5.conf``
files name the three: the exporter's (its own realm the default, as on a corporate
machine) and the cluster's JVM's (the cluster's realm the default). What it takes, found
here with MIT krb5 1.20 and Hadoop 3.5.0:

- on the exporter's side, ``[domain_realm]`` mapping the NameNodes' host names to the
  cluster's realm: without it the client asks for ``HTTP/localhost`` in its own realm
  ("Server HTTP/localhost@CLIENTS.GARMEXPORT.TEST not found in Kerberos database"). MIT
  maps no numeric address that way (a ``127.0.0.1`` entry is not used: the default realm
  is), hence NameNodes named ``localhost`` here, not ``127.0.0.1``. ``[capaths]`` is
  written but MIT needs none for a direct trust: it asks its own KDC for
  ``krbtgt/GARMEXPORT.TEST@CLIENTS...`` first (tried too with a users' realm whose name
  does not nest, ``CORP.EXAMPLE``);
- on the cluster's side, ``hadoop.security.auth_to_local`` with a rule for the users'
  realm: Hadoop's ``DEFAULT`` rule strips the default realm only, and a principal that no
  rule maps gets an HTTP 500 once its ticket has been accepted ("NoMatchingRule: No rules
  applied to ..."; see the last test for what the exporter says then). Nothing more: the
  delegation tokens the NameNode hands the DataNodes are the mapped user's, and the files
  are that short name's.

Same cluster set-up as test_hdfs_kerberos.py (its functions and fixtures, imported): an
HA pair and DataNodes on ``ignore.secure.ports.for.testing``. Runs in
``tox -e hdfs-kerberos``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests

from garmexport.errors import StorageError
from tests.hdfs.secure_gate import skip_unless_secure

skip_unless_secure()  # before the secure module's names (secure_gate says why)
from tests.hdfs.test_hdfs_kerberos import (  # skips this module where that one is skipped
    Secure, kerberized, realm, security_conf, storage, storage_backend,  # noqa: F401 - fixtures
)
from tests.hdfs_cluster import HdfsUnavailable, mini_hdfs
from tests.integration.harness import exporter_env
from tests.integration.test_cli_operator import garmexport, lines
from tests.kdc import REALM, Kdc, krb5_conf

# the storage contract, checked against the cluster with a principal of the users' realm
from tests.storage.test_conformance import REMOTE_CASES  # noqa: E402

globals().update(REMOTE_CASES)  # collected here again

pytestmark = pytest.mark.xdist_group("hdfs-cross-realm")

CLIENTS = "CLIENTS.GARMEXPORT.TEST"
STRAY = "STRAY.GARMEXPORT.TEST"
HTTP = "HTTP/localhost"  # the NameNodes' web servers, as the exporter names them
# users of CLIENTS by their first component; the cluster's own principals as by default
AUTH_TO_LOCAL = rf"RULE:[1:$1@$0](.*@{re.escape(CLIENTS)})s/@.*// DEFAULT"


@dataclass
class Realms:
    cluster: Kdc  # the cluster's realm: the NameNodes', DataNodes' and web servers' keys
    clients: Kdc  # the users' realm, which the cluster's trusts
    stray: Kdc  # a users' realm the cluster's does not trust (until a test makes it)
    client_conf: Path  # the exporter's krb5.conf: the users' realm by default
    cluster_conf: Path  # the NameNodes' and DataNodes': the cluster's realm by default


class ByHostName(Secure):
    def root(self, owner: str = "garm") -> str:
        """A fresh root, its NameNodes named ``localhost``, as the cluster's realm maps."""
        return super().root(owner).replace("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def realms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realms]:
    cluster, service, _ = realm(tmp_path_factory.mktemp("kdc-cluster"))
    started = [cluster]
    try:
        clients = Kdc(tmp_path_factory.mktemp("kdc-clients"), CLIENTS).start()
        started.append(clients)
        stray = Kdc(tmp_path_factory.mktemp("kdc-stray"), STRAY).start()
        started.append(stray)
        cluster.trust(clients)
        # the web servers as HTTP/localhost too: MIT maps no numeric address to a realm
        cluster.kadmin(f"addprinc -randkey {cluster.principal(HTTP)}")
        cluster.kadmin(f"ktadd -k {service} {cluster.principal(HTTP)}")
        confs = tmp_path_factory.mktemp("krb5")
        # the exporter's machine: its own realm by default, the cluster's hosts mapped
        client_conf = krb5_conf(confs / "client.conf", [clients, cluster, stray],
                                hosts={"localhost": REALM})
        # the cluster's: its realm by default (Hadoop's DEFAULT rule strips that one)
        cluster_conf = krb5_conf(confs / "cluster.conf", [cluster, clients, stray])
        yield Realms(cluster, clients, stray, client_conf, cluster_conf)
    finally:
        for kdc in started:
            kdc.stop()


@pytest.fixture(scope="module")
def secure_hdfs(realms: Realms) -> Iterator[Secure]:
    """The secure HA cluster in the cluster's realm; principals and keytabs of the users'."""
    service = realms.cluster.root / "service.keytab"
    keytabs = {"garm": realms.clients.add("garm")}
    conf = {
        **security_conf(service),
        "hadoop.security.auth_to_local": AUTH_TO_LOCAL,
        "dfs.web.authentication.kerberos.principal": f"{HTTP}@{REALM}",
        "hadoop.http.authentication.kerberos.principal": f"{HTTP}@{REALM}",
        "ignore.secure.ports.for.testing": "true",
        "dfs.client.failover.proxy.provider.minidfs-ns":
            "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider",
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KRB5_CONFIG", str(realms.client_conf))  # this process and its kinit
        for key in ("KRB5CCNAME", "KRB5RCACHETYPE"):
            mp.setenv(key, realms.clients.env[key])
        try:
            jvm = [f"-Djava.security.krb5.conf={realms.cluster_conf}"]
            with mini_hdfs(conf=conf, ha=True, jvm_args=jvm) as cluster:
                yield ByHostName(realms.clients, cluster, keytabs)
        except HdfsUnavailable as exc:
            pytest.fail(f"a secure HDFS cannot start here: {exc}")


def test_a_principal_of_the_users_realm_writes_files_owned_by_its_mapped_short_name(
        realms: Realms, secure_hdfs: Secure) -> None:
    """garm@CLIENTS negotiates SPNEGO with HTTP/localhost@GARMEXPORT.TEST through a
    cross-realm TGT; the NameNode maps it to ``garm`` (auth_to_local), whose files these
    are, and the DataNodes take its delegation token."""
    root = secure_hdfs.root(owner="garm")
    storage = kerberized(secure_hdfs, root)
    try:
        storage.put_exclusive("fs/day=2026-11-01/0.parquet", b"across realms")
        assert storage.read("fs/day=2026-11-01/0.parquet") == b"across realms"
        session: requests.Session = storage._client._session  # type: ignore[attr-defined]
        nn = (f"http://localhost:{secure_hdfs.cluster.http_ports[0]}"
              f"/webhdfs/v1{urlsplit(root).path}/fs/day=2026-11-01/0.parquet")
        status = session.get(nn, params={"op": "GETFILESTATUS"}).json()["FileStatus"]
        assert (status["owner"], status["group"]) != ("garm@" + CLIENTS, "")
        assert status["owner"] == "garm", status
        redirect = session.get(nn, params={"op": "OPEN"}, allow_redirects=False)
        location = redirect.headers["Location"]
        assert dict(parse_qsl(urlsplit(location).query)).get("delegation"), location
        assert requests.get(location, timeout=30).content == b"across realms"  # a DataNode
        cookie = next(c.value or "" for c in session.cookies if c.name == "hadoop.auth")
        assert f"p=garm@{CLIENTS}" in cookie and "u=garm&" in cookie, cookie
    finally:
        storage.close()
    # the tickets took the trust: a cross-realm TGT from the users' KDC, the service
    # ticket from the cluster's, for a client of the users' realm
    assert re.search(rf"TGS_REQ .*ISSUE: .* garm@{re.escape(CLIENTS)} for "
                     rf"krbtgt/{re.escape(REALM)}@{re.escape(CLIENTS)}",
                     (realms.clients.root / "kdc.log").read_text())
    assert re.search(rf"TGS_REQ .*ISSUE: .* garm@{re.escape(CLIENTS)} for "
                     rf"{HTTP}@{re.escape(REALM)}",
                     (realms.cluster.root / "kdc.log").read_text())


def _answers(storage: object) -> list[tuple[str, int]]:
    """The WebHDFS ops and HTTP statuses of the answers the storage's session gets, in
    order (its adapter's sends, seen as they return: the auth's hook raises before a
    session's would)."""
    seen: list[tuple[str, int]] = []
    adapter = storage._client._session.get_adapter("http://")  # type: ignore[attr-defined]
    send = adapter.send

    def counted(*args: object, **kwargs: object) -> requests.Response:
        res: requests.Response = send(*args, **kwargs)
        seen.append((dict(parse_qsl(urlsplit(res.url).query)).get("op", ""), res.status_code))
        return res

    adapter.send = counted
    return seen


def test_a_realm_the_cluster_does_not_trust_then_does_not_map_is_one_clear_error_each(
        realms: Realms, secure_hdfs: Secure) -> None:
    """What an operator meets setting up a trust: without the cross-realm krbtgt, no
    service ticket (the error names the krbtgt principal the KDC lacks); with it but no
    auth_to_local rule for the realm, the NameNode refuses the principal (the error names
    the setting). One request each, not retried within the backend; and ``garmexport
    run`` stops at start-up on one line saying so."""
    keytab = realms.stray.add("garm")
    stray = Secure(realms.stray, secure_hdfs.cluster, {"garm": keytab})
    root = secure_hdfs.root(owner="garm")

    untrusted = kerberized(stray, root)
    seen = _answers(untrusted)
    with pytest.raises(StorageError) as no_trust:
        untrusted.list("")
    untrusted.close()
    assert seen == [("LISTSTATUS", 401)], seen  # asked for SPNEGO; no token could be made
    for said in (f"krbtgt/{REALM}@{STRAY} not found", "no cross-realm trust",
                 f"realm {STRAY} has no krbtgt/{REALM}@{STRAY}"):
        assert said in str(no_trust.value), no_trust.value

    realms.cluster.trust(realms.stray)
    unmapped = kerberized(stray, root)
    seen = _answers(unmapped)
    with pytest.raises(StorageError) as no_rule:
        unmapped.list("")
    # the ticket now reached the NameNode, which took it and then found no short name
    assert seen == [("LISTSTATUS", 401), ("LISTSTATUS", 500)], seen
    for said in (f"ticket of garm@{STRAY} (No rules applied to garm@{STRAY})",
                 "maps the principal to no user", "hadoop.security.auth_to_local"):
        assert said in str(no_rule.value), no_rule.value
    seen.clear()
    with pytest.raises(StorageError) as no_rule_on_write:  # a PUT's 500 has no body
        unmapped.put_exclusive("f", b"x")
    unmapped.close()
    # the CREATE, refused so, then the one best-effort removal of what it may have left
    assert seen == [("CREATE", 401), ("CREATE", 500), ("DELETE", 401), ("DELETE", 500)], seen
    assert str(no_rule_on_write.value).startswith("PUT "), no_rule_on_write.value
    for said in (f"ticket of garm@{STRAY}: it maps", "hadoop.security.auth_to_local"):
        assert said in str(no_rule_on_write.value), no_rule_on_write.value
    assert re.search(rf"TGS_REQ .*ISSUE: .* garm@{re.escape(STRAY)} for {HTTP}@",
                     (realms.cluster.root / "kdc.log").read_text())

    # and as `garmexport run` says it at start-up: one line, no traceback, soon
    env = exporter_env("127.0.0.1:9", "t", root, LOG_FORMAT="text", OUTPUT_HDFS_KERBEROS="true",
                       OUTPUT_HDFS_KERBEROS_PRINCIPAL=stray.principal("garm"),
                       OUTPUT_HDFS_KERBEROS_KEYTAB=str(keytab))
    code, err, seconds = garmexport(env, "run", timeout_s=60)
    print(f"exit {code} after {seconds:.1f} s: {err}")
    errors = [line for line in lines(err) if " INFO " not in line]  # INFO: the ticket got
    assert code == 2 and "Traceback" not in err and len(errors) == 1, err  # configuration
    for said in ("output.root", f"No rules applied to garm@{STRAY}",
                 "hadoop.security.auth_to_local"):
        assert said in errors[0], err
    assert seconds < 30, seconds
