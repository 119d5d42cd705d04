"""``swebhdfs://`` against a secure HDFS whose DataNodes protect data transfer with SASL.

The way a production secure cluster runs without privileged DataNode ports: the realm and
the Kerberos settings of test_hdfs_kerberos.py (imported, not copied), and instead of
``ignore.secure.ports.for.testing``:

- ``dfs.data.transfer.protection = authentication``: SASL on every DataNode connection
  (the WebHDFS DataNode writing a block to the pipeline, too); the DataNode refuses to
  start secure on an unprivileged port without it or the testing switch;
- ``dfs.http.policy = HTTPS_ONLY``, which SASL data transfer requires: the NameNode and the
  DataNodes serve WebHDFS over HTTPS alone, with a key store signed by a test CA that
  ``keytool`` makes in the module's temp directory (for ``127.0.0.1`` and ``localhost``);
- ``ssl-server.xml`` and ``ssl-client.xml``, which Hadoop looks up on the class path (by
  the names ``dfs.https.server.keystore.resource`` and ``hadoop.ssl.server.conf`` give,
  both ``ssl-server.xml``; an absolute path is not read): written to a directory put on
  the launcher's class path.

The client trusts the test CA through ``output.hdfs_ca_file``: requests checks certificates
against certifi's bundle, not the system's, and its only other way is REQUESTS_CA_BUNDLE,
process-wide and below a per-request ``verify``. One NameNode (HA is test_hdfs_kerberos.py's),
one DataNode.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from garmexport.errors import ConfigError
from garmexport.settings.config import OutputConfig
from garmexport.storage.base import Storage
from garmexport.storage.open import open_storage
from garmexport.storage.options import from_output
from garmexport.storage.root_check import prepare_for_run
from tests.hdfs.secure_gate import skip_unless_secure

skip_unless_secure()  # before the secure module's names (secure_gate says why)
from tests.hdfs.test_hdfs_kerberos import Secure, realm, security_conf
from tests.hdfs_cluster import HdfsUnavailable, mini_hdfs
from tests.integration.harness import exporter_env
from tests.integration.test_cli_operator import garmexport, lines
from tests.storage.conftest import Backend

# the storage contract, checked over HTTPS through the fixtures below (the Kerberos
# module has skipped this one, on import, where it cannot run)
from tests.storage.test_conformance import REMOTE_CASES  # noqa: E402

globals().update(REMOTE_CASES)  # collected here again

pytestmark = pytest.mark.xdist_group("hdfs-swebhdfs")

PASSWORD = "garmexport-test"  # of the test key stores, which hold nothing else


@dataclasses.dataclass(frozen=True)
class Tls:
    ca_pem: Path     # the test CA that signed the servers' certificate
    other_pem: Path  # a CA that signed nothing here
    conf_dir: Path   # ssl-server.xml and ssl-client.xml, for the class path


def _keytool(where: Path, *args: str) -> None:
    subprocess.run(["keytool", *args, "-storepass", PASSWORD, "-noprompt"], cwd=where,
                   check=True, capture_output=True, timeout=120)


def _ca(where: Path, name: str) -> Path:
    """A self-signed CA key pair in ``<name>.p12``; its certificate, PEM."""
    _keytool(where, "-genkeypair", "-keystore", f"{name}.p12", "-storetype", "PKCS12",
             "-alias", name, "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
             "-dname", f"CN=garmexport {name}", "-ext", "bc:c")
    _keytool(where, "-exportcert", "-rfc", "-keystore", f"{name}.p12", "-alias", name,
             "-file", f"{name}.pem")
    return where / f"{name}.pem"


def _properties(props: dict[str, str]) -> str:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>\n"
                   for k, v in props.items())
    return f"<?xml version=\"1.0\"?>\n<configuration>\n{body}</configuration>\n"


def make_tls(where: Path) -> Tls:
    """A test CA, a server key store it signed for 127.0.0.1 and localhost, a trust store
    of the CA, and the ssl-*.xml files naming them."""
    ca = _ca(where, "ca")
    _keytool(where, "-genkeypair", "-keystore", "server.p12", "-storetype", "PKCS12",
             "-alias", "server", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
             "-dname", "CN=127.0.0.1")
    _keytool(where, "-certreq", "-keystore", "server.p12", "-alias", "server",
             "-file", "server.csr")
    _keytool(where, "-gencert", "-keystore", "ca.p12", "-alias", "ca", "-rfc",
             "-infile", "server.csr", "-outfile", "server.pem", "-validity", "2",
             "-ext", "san=ip:127.0.0.1,dns:localhost", "-ext", "eku=serverAuth")
    for alias, cert in (("ca", "ca.pem"), ("server", "server.pem")):  # the chain, CA first
        _keytool(where, "-importcert", "-keystore", "server.p12", "-alias", alias,
                 "-file", cert)
    _keytool(where, "-importcert", "-keystore", "trust.p12", "-storetype", "PKCS12",
             "-alias", "ca", "-file", "ca.pem")
    conf_dir = where / "conf"
    conf_dir.mkdir()
    store = {"type": "pkcs12", "password": PASSWORD}
    (conf_dir / "ssl-server.xml").write_text(_properties({
        "ssl.server.keystore.location": str(where / "server.p12"),
        "ssl.server.keystore.keypassword": PASSWORD,
        **{f"ssl.server.keystore.{k}": v for k, v in store.items()},
        "ssl.server.truststore.location": str(where / "trust.p12"),
        **{f"ssl.server.truststore.{k}": v for k, v in store.items()}}))
    (conf_dir / "ssl-client.xml").write_text(_properties({
        "ssl.client.truststore.location": str(where / "trust.p12"),
        **{f"ssl.client.truststore.{k}": v for k, v in store.items()}}))
    return Tls(ca, _ca(where, "other"), conf_dir)


@dataclasses.dataclass
class SecureTls(Secure):
    tls: Tls

    def output(self, name: str = "garm", **more: object) -> dict[str, object]:
        return super().output(name, **{"hdfs_ca_file": str(self.tls.ca_pem), **more})

    def root(self, owner: str = "garm") -> str:
        """A fresh directory owned by ``owner``; the ``swebhdfs://`` URI of a root in it."""
        base = f"/t/{uuid.uuid4().hex[:12]}"
        self.cluster.mkdir(base, owner)
        return f"swebhdfs://127.0.0.1:{self.cluster.https_ports[0]}{base}/out"


@pytest.fixture(scope="module")
def secure_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureTls]:
    kdc, service, keytabs = realm(tmp_path_factory.mktemp("kdc"))
    try:
        tls = make_tls(tmp_path_factory.mktemp("tls"))
        conf = {
            **security_conf(service),
            "dfs.data.transfer.protection": "authentication",
            "dfs.http.policy": "HTTPS_ONLY",
            "dfs.namenode.https-address": "127.0.0.1:0",
            "dfs.datanode.https.address": "127.0.0.1:0",
        }
        with pytest.MonkeyPatch.context() as mp:
            for key in ("KRB5_CONFIG", "KRB5CCNAME", "KRB5RCACHETYPE"):
                mp.setenv(key, kdc.env[key])  # this process and its children use the test realm
            mp.delenv("REQUESTS_CA_BUNDLE", raising=False)
            mp.delenv("CURL_CA_BUNDLE", raising=False)
            with mini_hdfs(conf=conf, datanodes=1, classpath=[tls.conf_dir],
                           jvm_args=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"]) as cluster:
                yield SecureTls(kdc, cluster, keytabs, tls)
    except HdfsUnavailable as exc:
        pytest.fail(f"a secure HDFS over HTTPS cannot start here: {exc}")
    finally:
        kdc.stop()


@pytest.fixture
def storage_backend(secure_tls: SecureTls) -> Iterator[Backend]:
    """The conformance tests' backend: swebhdfs:// with Kerberos on the secure cluster."""
    root, output = secure_tls.root(), secure_tls.output()
    storage = open_storage(root, "inst-a", from_output(OutputConfig(**output)))  # type: ignore[arg-type]
    try:
        yield Backend(root, output, storage)
    finally:
        storage.close()


@pytest.fixture
def storage(storage_backend: Backend) -> Storage:
    return storage_backend.storage


def opened(secure: SecureTls, root: str, **more: object) -> Storage:
    output = OutputConfig(**secure.output(**more))  # type: ignore[arg-type]
    return open_storage(root, "inst-a", from_output(output))


def _datanode_xfer(session: requests.Session, nn: str, path: str) -> tuple[str, int]:
    """Host and data transfer port of the DataNode holding the first block of ``path``."""
    answer = session.get(f"{nn}/webhdfs/v1{path}", params={"op": "GETFILEBLOCKLOCATIONS"})
    answer.raise_for_status()
    host, _, port = answer.json()["BlockLocations"]["BlockLocation"][0]["names"][0].rpartition(":")
    return host, int(port)


def test_webhdfs_is_https_only_and_the_datanode_takes_data_over_https(
        secure_tls: SecureTls) -> None:
    """No plain HTTP port; the NameNode's redirect sends a CREATE's data to the DataNode's
    HTTPS port; plain HTTP to the NameNode's HTTPS port gets no WebHDFS answer."""
    cluster = secure_tls.cluster
    assert cluster.http_ports == [0] and cluster.https_ports[0] > 0, cluster.namenodes
    root = secure_tls.root()
    storage = opened(secure_tls, root)
    calls: list[str] = []
    session: requests.Session = storage._client._session  # type: ignore[attr-defined]
    session.hooks["response"].append(lambda res, **_: calls.append(res.url))
    storage.put_exclusive("fs/a", b"over https")
    assert storage.read("fs/a") == b"over https"
    datanode = [u for u in calls if urlsplit(u).port != cluster.https_ports[0]]
    assert datanode and all(u.startswith("https://") for u in calls), calls
    storage.close()
    try:
        plain = requests.get(f"http://127.0.0.1:{cluster.https_ports[0]}/webhdfs/v1/?op=LISTSTATUS",
                             timeout=10)
    except requests.ConnectionError:
        return  # the TLS port closed the connection
    assert plain.status_code == 400 and "FileStatuses" not in plain.text, plain.text[:300]


def _recv_delimited(conn: socket.socket) -> bytes:
    """One varint-length-delimited protobuf message (what Hadoop's parseDelimitedFrom reads)."""
    def byte() -> int:
        got = conn.recv(1)
        assert got, "the DataNode closed the connection"
        return got[0]

    length, shift = 0, 0
    while True:
        b = byte()
        length |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    data = b""
    while len(data) < length:
        chunk = conn.recv(length - len(data))
        assert chunk, "the DataNode closed the connection"
        data += chunk
    return data


def test_the_datanode_answers_a_data_transfer_connection_with_a_sasl_challenge(
        secure_tls: SecureTls) -> None:
    """The DataNode holding a block written through WebHDFS, asked on its data transfer
    port as a SASL client asks (the magic number 0xDEADBEEF, then an empty first
    DataTransferEncryptorMessageProto), answers with SASL's DIGEST-MD5 challenge offering
    qop "auth": the ``authentication`` protection. A DataNode running with
    ``ignore.secure.ports.for.testing`` instead reads those bytes as an operation and
    fails them."""
    root = secure_tls.root()
    storage = opened(secure_tls, root)
    storage.put_exclusive("f", b"block data")
    session: requests.Session = storage._client._session  # type: ignore[attr-defined]
    host, port = _datanode_xfer(session, f"https://127.0.0.1:{secure_tls.cluster.https_ports[0]}",
                                urlsplit(root).path + "/f")
    storage.close()
    with socket.create_connection((host, port), timeout=30) as conn:
        # status SUCCESS (field 1 = 0), payload empty (field 2): 08 00 12 00, delimited
        conn.sendall(struct.pack(">I", 0xDEADBEEF) + bytes([4, 0x08, 0x00, 0x12, 0x00]))
        answer = _recv_delimited(conn)
    assert answer[:2] == b"\x08\x00", answer  # status SUCCESS: the exchange goes on
    assert b'qop="auth"' in answer and b"algorithm=md5-sess" in answer, answer


def test_a_ca_file_given_wins_over_requests_ca_bundle(
        secure_tls: SecureTls, monkeypatch: pytest.MonkeyPatch) -> None:
    """REQUESTS_CA_BUNDLE alone is honoured (requests reads it), but it does not override
    output.hdfs_ca_file, which requests' own precedence would let it do."""
    root = secure_tls.root()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(secure_tls.tls.ca_pem))
    by_env = opened(secure_tls, root, hdfs_ca_file="")
    by_env.put_exclusive("a", b"1")
    by_env.close()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(secure_tls.tls.other_pem))
    by_key = opened(secure_tls, root)
    assert by_key.read("a") == b"1"
    by_key.close()


@pytest.mark.parametrize("ca_file", ["", "other"])
def test_an_untrusted_certificate_is_one_config_error_naming_the_root_and_the_key(
        secure_tls: SecureTls, ca_file: str, caplog: pytest.LogCaptureFixture) -> None:
    """certifi's bundle, or a CA that signed something else: ConfigError at the first call,
    not the in-call retries of an outage; at start-up too (root_check passes it on)."""
    caplog.set_level(logging.INFO)
    root = secure_tls.root()
    given = str(secure_tls.tls.other_pem) if ca_file else ""
    storage = opened(secure_tls, root, hdfs_ca_file=given)
    started = time.monotonic()
    with pytest.raises(ConfigError) as raised:
        storage.list("")
    assert time.monotonic() - started < 5
    said = str(raised.value)
    for part in (repr(root), "127.0.0.1", "is not trusted (self-signed certificate",
                 "output.hdfs_ca_file"):
        assert part in said, said
    assert not [r for r in caplog.records if "retry" in r.getMessage()], caplog.records
    storage.close()
    with pytest.raises(ConfigError, match="not trusted"):
        prepare_for_run(root, "inst-a", from_output(OutputConfig(**secure_tls.output(
            hdfs_ca_file=given))))  # type: ignore[arg-type]


def test_garmexport_run_on_an_untrusted_root_exits_2_with_one_line(secure_tls: SecureTls) -> None:
    root = secure_tls.root()
    env = exporter_env("127.0.0.1:9", "t", root, LOG_FORMAT="text",
                       OUTPUT_HDFS_KERBEROS="true",
                       OUTPUT_HDFS_KERBEROS_PRINCIPAL=secure_tls.principal("garm"),
                       OUTPUT_HDFS_KERBEROS_KEYTAB=str(secure_tls.keytabs["garm"]))
    env.pop("REQUESTS_CA_BUNDLE", None)
    code, err, seconds = garmexport(env, "run", timeout_s=60)
    print(f"exit {code} after {seconds:.1f} s: {err}")
    assert code == 2, err
    errors = [line for line in lines(err) if " INFO " not in line]
    assert "Traceback" not in err and len(errors) == 1, err
    for said in (repr(root), "not trusted", "GARMEXPORT_OUTPUT_HDFS_CA_FILE"):
        assert said in err, err
