"""The exporter's /metrics during a real run agree with what was produced.

One ``garmexport run`` process (metrics on a free port, JSON log: the ``metrics_serving``
event names the port) joins an empty topic; records are then produced (several types,
every malformed kind), so the lag rises and must fall back to zero on every partition.
Scraped repeatedly, the counters must end equal to the producer's report:

- ``events_consumed_total`` per partition = records in the partition (each read once: no
  restart happens in this test);
- ``rows_published_total{kind="data"}`` and ``events_exported_total`` per type = good
  records produced of the type, minus those quarantined for an event time outside the
  window (the generator dates events at most ``days`` before their Kafka time, inside the
  default 30-day window: none, which is checked too);
- ``quarantined_total`` per (type, reason) = the bad records read back from the topic and
  classified as the exporter must (:func:`expected_counts`): head-level failures (null,
  empty, short head, length mismatch, unknown marker) under type ``_frame``; ``bad_header``
  and ``bad_body`` under the type whose marker the record carries, except for the two types
  without output, whose records are dropped before decoding. So per reason the quarantine
  holds the producer's bad records of that kind minus those bad_header/bad_body records
  that carry marker 0 or 3 (the generator's bad kinds are ``frames.Reason`` values);
- ``events_not_exported_total`` = records carrying marker 0 or 3 (no output), bad or not.

``/health/live`` answers 200 and ``/health/ready`` 200 once the partitions are assigned.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from garmexport.wire.events import REGISTRY
from garmexport.wire import frames
from garmexport.kafka.topic_scan import scan
from garmexport.wire.frames import Reason
from garmexport.testbed.generator import BAD_KINDS
from tests.integration.harness import Exporter, exporter_env, produce, topic_ends

RECORDS = 20_000
PARTITIONS = 4
HEAD_REASONS = {Reason.NULL_VALUE.value, Reason.EMPTY_VALUE.value, Reason.SHORT_HEAD.value,
                Reason.LENGTH_MISMATCH.value, Reason.UNKNOWN_MARKER.value}
OUTPUT_OF_NAME = {t.name: t.output for t in REGISTRY.values()}


def expected_counts(bootstrap: str, topic: str) -> tuple[Counter, Counter, int]:
    """From the topic's records: (data rows per type, quarantined per (type, reason),
    records not exported), classified by head then full decode as the exporter does."""
    data, bad, dropped = Counter(), Counter(), 0

    def on_records(_partition: int, records: list) -> None:
        nonlocal dropped
        for m in records:
            head = frames.read_head(m.value())
            if isinstance(head, frames.DecodeFailure):
                bad["_frame", head.reason.value] += 1
                continue
            output = REGISTRY[head[0]].output
            if output is None:
                dropped += 1
                continue
            decoded = frames.decode(m.value())
            if isinstance(decoded, frames.DecodeFailure):
                bad[output, decoded.reason.value] += 1
            else:
                data[output] += 1

    scan({"bootstrap.servers": bootstrap}, topic, on_records, timeout_s=120)
    return data, bad, dropped


def scrape(exporter: Exporter) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] from one GET /metrics."""
    status, body = exporter.http_get("/metrics")
    assert status == 200, body[:500]
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def by(samples: dict, name: str, *labels: str) -> Counter:
    """Sum of ``name`` grouped by ``labels`` (a tuple key, or the bare value for one)."""
    out: Counter = Counter()
    for lab, value in samples.get(name, []):
        key = tuple(lab.get(k, "") for k in labels)
        out[key[0] if len(key) == 1 else key] += value
    return out


def test_lag_falls_to_zero_and_counters_match_what_was_produced(broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"), WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1)
    exporter = Exporter(env, tmp_path, "metrics")
    try:
        port = exporter.metrics_port()
        assert port > 0
        assert exporter.http_get("/health/live")[0] == 200
        exporter.wait_event("assigned", timeout_s=60)
        deadline = time.monotonic() + 30
        while exporter.http_get("/health/ready")[0] != 200:
            assert time.monotonic() < deadline, exporter.http_get("/health/ready")
            time.sleep(0.2)

        # the lag is watched from the first record produced: the exporter may catch up
        # before the counts below are read back from the topic
        seen_lag, watching = [0.0], threading.Event()

        def watch() -> None:
            while not watching.is_set():
                lag = by(scrape(exporter), "garmexport_consumer_lag_offsets", "partition")
                seen_lag[0] = max([seen_lag[0], *lag.values()])
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        report = produce(broker.bootstrap, topic, RECORDS, partitions=PARTITIONS, seed=9,
                         days=2, bad_share=0.02)
        assert set(report["bad"]) == {r.value for r in BAD_KINDS}
        ends = topic_ends(broker.bootstrap, topic)
        good = {OUTPUT_OF_NAME[n]: c for n, c in report["types"].items() if OUTPUT_OF_NAME[n]}
        data, bad, dropped = expected_counts(broker.bootstrap, topic)
        assert data == Counter(good) and len(good) == 18  # the topic holds what was reported
        bad_dropped = dropped - sum(c for n, c in report["types"].items() if not OUTPUT_OF_NAME[n])
        per_kind: Counter = Counter()
        for (_, reason), n in bad.items():
            per_kind[reason] += n
        decoded_later = (Reason.BAD_HEADER.value, Reason.BAD_BODY.value)
        assert bad_dropped == sum(report["bad"][r] - per_kind[r] for r in decoded_later) >= 0
        for reason in HEAD_REASONS:
            assert per_kind[reason] == report["bad"][reason]  # a bad head is never dropped

        watching.set()
        watcher.join(timeout=10)
        max_lag, deadline = seen_lag[0], time.monotonic() + 180
        while True:
            samples = scrape(exporter)
            lag = by(samples, "garmexport_consumer_lag_offsets", "partition")
            max_lag = max([max_lag, *lag.values()])
            consumed = by(samples, "garmexport_events_consumed_total", "partition")
            rows = by(samples, "garmexport_rows_published_total", "type", "kind")
            settled = (sorted(lag) == [str(p) for p in range(PARTITIONS)]
                       and not any(lag.values())
                       and sum(consumed.values()) == RECORDS
                       and sum(rows.values()) == RECORDS - dropped)
            if settled:
                break
            assert exporter.alive(), exporter.tail()
            assert time.monotonic() < deadline, (dict(lag), dict(consumed), exporter.tail())
            time.sleep(0.25)

        assert max_lag > 0, "the lag never showed the produced records"
        assert consumed == Counter({str(p): end for p, end in ends.items()})
        quarantined = by(samples, "garmexport_quarantined_total", "type", "reason")
        out_of_window = Counter({t: n for (t, r), n in quarantined.items()
                                 if r == Reason.TIMESTAMP_OUT_OF_WINDOW.value})
        assert sum(out_of_window.values()) == 0
        data_rows = Counter({t: n for (t, k), n in rows.items() if k == "data" and n})
        expected_rows = Counter({t: n - out_of_window[t] for t, n in good.items()})
        assert data_rows == expected_rows
        exported = by(samples, "garmexport_events_exported_total", "type")
        assert Counter({t: n for t, n in exported.items() if n}) == expected_rows
        assert sum(n for (t, k), n in rows.items() if k == "quarantine") == sum(bad.values())
        assert sum(by(samples, "garmexport_events_not_exported_total", "marker").values()) == dropped
        assert exporter.http_get("/health/ready")[0] == 200
        assert exporter.terminate() == 0, exporter.tail()
    finally:
        exporter.close()
    # Last, so that every other check has run when this one fails: each quarantined record
    # counted once, under its origin (the reader must not count again what the router
    # flagged and the writer reports).
    assert Counter({k: n for k, n in quarantined.items() if n}) == bad
