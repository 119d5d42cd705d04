"""Start a real Prometheus Pushgateway (Debian's ``prometheus-pushgateway``) for tests.

It listens on a free loopback port, keeps nothing on disk (no persistence file), and is
killed at the end. :func:`pushed` reads back what it holds, as Prometheus would scrape it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

BINARY = "prometheus-pushgateway"


class PushgatewayUnavailable(RuntimeError):
    """The binary is missing or the server did not come up."""


@dataclass(frozen=True)
class Pushgateway:
    url: str  # http://127.0.0.1:PORT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def pushgateway_server(log_dir: Path) -> Iterator[Pushgateway]:
    binary = shutil.which(BINARY) or shutil.which(BINARY, path="/usr/bin")
    if binary is None:
        raise PushgatewayUnavailable(
            f"no `{BINARY}` binary (Debian: apt-get install --no-install-recommends {BINARY})")
    port = _free_port()
    log = open(log_dir / "pushgateway.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise PushgatewayUnavailable(
                    f"pushgateway did not start: {(log_dir / 'pushgateway.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield Pushgateway(url)
    finally:
        proc.kill()
        proc.wait(10)
        log.close()


def pushed(gateway: Pushgateway, job: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] of ``job`` as the gateway exposes them."""
    with urllib.request.urlopen(f"{gateway.url}/metrics", timeout=5) as r:
        body = r.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            if s.labels.get("job") == job:
                samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples
