"""Writing records to a topic: the one place that builds a Kafka producer.

The producer batches hard (linger, a large queue, no compression) because it feeds
benchmarks of the exporter and must not be the bottleneck. Records go to explicit
partitions with their own Kafka timestamps. A stop (Ctrl-C in ``produce``) drops what is
still queued, waits for what is in flight, and the report says what reached the topic.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from confluent_kafka import KafkaError, Producer

from garmexport.errors import BrokerError
from garmexport.kafka.client_callbacks import client_log_settings


class Tally(Protocol):
    """What :func:`send` counts the records in (the generator's tally)."""

    partitions: collections.Counter[int]

    def add(self, record: Any) -> None: ...  # noqa: ANN401 - a record of the caller's

    @property
    def total(self) -> int: ...

    def as_dict(self) -> dict[str, object]: ...


PRODUCER_SETTINGS: Mapping[str, object] = {
    "linger.ms": 20,
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}
_FLUSH_TIMEOUT_S = 120.0
#: after Ctrl-C, the longest wait for the records already sent to the broker
_IN_FLIGHT_WAIT_S = 10.0
#: records generated between two looks at the stop flag and the pace
_STEP = 256
_PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)

def send(settings: Mapping[str, object], topic: str, records: Iterable[Any], tally: Tally,
         rate: float | None = None,
            progress: Callable[[int, float], None] | None = None,
            progress_s: float = 5.0, stop: threading.Event | None = None) -> dict[str, object]:
    """Send ``records`` (each with ``value``, ``key``, ``partition`` and ``timestamp_ms``),
    counting each in ``tally`` as it is handed to the client; return the report
    (:mod:`garmexport.cli.produce` says what it holds).

    ``rate`` (records/s) paces the sends; ``progress(done, seconds)`` is called every
    ``progress_s``. ``stop`` set (Ctrl-C) ends the run early: the records not sent yet are
    dropped, those in flight waited for, and the report says ``interrupted`` and what was
    delivered. Raises BrokerError if records are still undelivered after 120 s of
    flushing; records the broker refused are counted in ``failed``.
    """
    stopped = stop if stop is not None else threading.Event()
    failures: list[str] = []
    refused: collections.Counter[int] = collections.Counter()
    dropped: collections.Counter[int] = collections.Counter()

    def on_delivery(error, message) -> None:  # noqa: ANN001 - KafkaError, Message
        if error is None:
            return
        if error.code() in _PURGED:  # dropped after Ctrl-C: never sent
            dropped[message.partition()] += 1
        else:
            failures.append(str(error))
            refused[message.partition()] += 1

    producer = Producer({**settings, "on_delivery": on_delivery,
                         "delivery.report.only.error": True, **client_log_settings()})
    value_bytes = 0
    start = time.monotonic()
    next_report = start + progress_s
    for i, record in enumerate(records):
        if i % _STEP == 0 and (stopped.is_set()
                               or (rate and not _wait_until(start + i / rate, stopped))):
            break
        while True:
            try:
                producer.produce(topic, value=record.value, key=record.key,
                                 partition=record.partition, timestamp=record.timestamp_ms)
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.05)
        tally.add(record)
        value_bytes += len(record.value or b"")
        if i % 4096 == 0:
            producer.poll(0)
            if progress and progress_s > 0 and time.monotonic() >= next_report:
                progress(i, time.monotonic() - start)
                next_report = time.monotonic() + progress_s
    deadline = time.monotonic() + _FLUSH_TIMEOUT_S
    while len(producer) and not stopped.is_set():
        if time.monotonic() >= deadline:
            raise BrokerError(f"records to {topic} still undelivered after {_FLUSH_TIMEOUT_S} s")
        producer.flush(0.2)
    unknown = _settle(producer) if stopped.is_set() else 0
    seconds = time.monotonic() - start
    delivered = tally.total - len(failures) - sum(dropped.values()) - unknown
    return {"topic": topic, **tally.as_dict(), "failed": len(failures),
            "first_failure": failures[0] if failures else None, "value_bytes": value_bytes,
            "seconds": round(seconds, 3),
            "records_per_s": round(tally.total / seconds) if seconds > 0 else None,
            "interrupted": stopped.is_set(), "delivered": delivered,
            # exact once nothing is left in flight; unknown while something is
            "delivered_partitions": None if unknown else {
                str(p): n - refused[p] - dropped[p] for p, n in sorted(tally.partitions.items())},
            "dropped": sum(dropped.values()), "in_flight": unknown}


def _wait_until(when: float, stopped: threading.Event) -> bool:
    """Sleep until monotonic ``when`` (the pace of ``--rate``); False if ``stopped`` first."""
    ahead = when - time.monotonic()
    return ahead <= 0 or not stopped.wait(ahead)


def _settle(producer: Producer) -> int:
    """After a stop: drop what is still queued, wait up to :data:`_IN_FLIGHT_WAIT_S` for
    what is in flight (a second Ctrl-C ends the wait); how many records are left whose
    fate is unknown."""
    try:
        producer.purge(in_queue=True, in_flight=False)
        deadline = time.monotonic() + _IN_FLIGHT_WAIT_S
        while len(producer) and time.monotonic() < deadline:
            producer.flush(0.1)
    except KeyboardInterrupt:
        pass
    return len(producer)
