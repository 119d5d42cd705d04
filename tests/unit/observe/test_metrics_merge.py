"""The instance's /metrics joins its readers' series, every kind that
garmexport.observe.metrics exports, each sample labelled with its reader; and why
prometheus-client's multiprocess mode was not used (the last test shows what it loses)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from garmexport.observe.health import Health, serve, write_port_file
from garmexport.observe.metrics import Metrics
from garmexport.observe.metrics_merge import ReadersCollector, merge
from garmexport.observe.reader_probe import ReaderProbe


def reader_text(partitions: list[int], revoked: list[int] = ()) -> str:
    """A reader's /metrics after some of everything, the ``revoked`` partitions forgotten."""
    registry = CollectorRegistry()
    metrics = Metrics.create(registry, wall_s=lambda: 2_000.0)
    for p in [*partitions, *revoked]:
        metrics.assign_partition("t", p)
        metrics.consumed("t", p, 10)
        metrics.set_lag("t", p, 100, 40)
        metrics.set_lag_time("t", p, True, 1_000_000)  # 1000 s old at the wall clock
        metrics.committed("fs", p, 7, 1.5)
        metrics.set_watermark("fs", p, 6)
    metrics.published("fs", "data", 5, 100, 0.2)
    metrics.recovered("assign", 0.3)
    metrics.set_writers(1, 2, 300, 4.0)
    for p in revoked:
        metrics.forget_partition("t", p)
    return generate_latest(registry).decode()


def samples(families) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list] = {}
    for family in families:
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_every_family_of_every_reader_comes_through_once_labelled() -> None:
    texts = [("r0", reader_text([0], revoked=[1])), ("r1", reader_text([1]))]
    merged = merge(texts)
    names = [family.name for family in merged]
    assert len(names) == len(set(names))
    one = {family.name for family in text_string_to_metric_families(texts[1][1])}
    assert set(names) == one
    got = samples(merged)
    # counters and histograms: one series per reader, values intact
    consumed = {(lab["reader"], lab["partition"]): v
                for lab, v in got["garmexport_events_consumed_total"]}
    assert consumed == {("r0", "0"): 10, ("r0", "1"): 10, ("r1", "1"): 10}
    counts = Counter(lab["reader"] for lab, _ in got["garmexport_publish_duration_seconds_count"])
    assert counts == Counter({"r0": 1, "r1": 1})
    # a revoked partition's gauges are under its new owner only
    lag = {(lab["reader"], lab["partition"]): v for lab, v in got["garmexport_consumer_lag_offsets"]}
    assert lag == {("r0", "0"): 60, ("r1", "1"): 60}
    # the lag in seconds is aged at scrape time, the build is an Info, process_* a collector
    assert {v for _, v in got["garmexport_consumer_lag_seconds"]} == {1000.0}
    assert {lab["reader"] for lab, _ in got["garmexport_build_info"]} == {"r0", "r1"}
    assert {lab["reader"] for lab, _ in got["process_resident_memory_bytes"]} == {"r0", "r1"}
    # what comes out is the exposition format again
    registry = CollectorRegistry()
    registry.register(type("Fixed", (), {"collect": lambda self: iter(merged)})())
    again = samples(text_string_to_metric_families(generate_latest(registry).decode()))
    assert again["garmexport_consumer_lag_offsets"] == got["garmexport_consumer_lag_offsets"]


def test_the_collector_scrapes_serving_readers_and_says_which_did_not_answer(
        tmp_path: Path) -> None:
    registry = CollectorRegistry()
    Metrics.create(registry).consumed("t", 3, 4)
    server = serve("127.0.0.1", 0, registry, Health(live_timeout_s=10))
    try:
        write_port_file(str(tmp_path / "r0.port"), server.port)
        probe = ReaderProbe({"r0": str(tmp_path / "r0.port"), "r1": str(tmp_path / "r1.port")})
        instance = CollectorRegistry()
        instance.register(ReadersCollector(probe))
        got = samples(text_string_to_metric_families(generate_latest(instance).decode()))
    finally:
        server.close()
    assert {lab["reader"]: v for lab, v in got["garmexport_reader_scrape_ok"]} == {"r0": 1, "r1": 0}
    assert [(lab["reader"], v) for lab, v in got["garmexport_events_consumed_total"]] == [("r0", 4)]
    assert {lab["reader"] for lab, _ in got["process_resident_memory_bytes"]} == {"supervisor", "r0"}


MULTIPROCESS_READER = textwrap.dedent("""
    import sys, warnings
    from prometheus_client import CollectorRegistry
    from garmexport.observe.metrics import Metrics
    warnings.simplefilter("ignore")
    metrics = Metrics.create(CollectorRegistry(), wall_s=lambda: 2_000.0)
    p = int(sys.argv[1])
    metrics.set_lag("t", p, 100, 40)
    metrics.set_lag_time("t", p, True, 1_000_000)
    if p == 0:
        metrics.forget_partition("t", p)  # revoked: its lag must not be shown any more
""")


def test_multiprocess_mode_would_lose_four_kinds_of_what_the_readers_export(
        tmp_path: Path) -> None:
    """Why :mod:`garmexport.observe.metrics_merge` exists (DESIGN.md 9.8). If this fails,
    prometheus-client learnt these kinds: reconsider its multiprocess mode."""
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for p in (0, 1):
        subprocess.run([sys.executable, "-c", MULTIPROCESS_READER, str(p)], env=env,
                       check=True, timeout=60)
    collect = textwrap.dedent("""
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.multiprocess import MultiProcessCollector
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        print(generate_latest(registry).decode())
    """)
    text = subprocess.run([sys.executable, "-c", collect], env=env, check=True, timeout=60,
                          capture_output=True, text=True).stdout
    got = samples(text_string_to_metric_families(text))
    lag = {lab["partition"] for lab, _ in got["garmexport_consumer_lag_offsets"]}
    assert lag == {"0", "1"}  # remove() is not implemented: the revoked partition stays
    assert {v for _, v in got["garmexport_consumer_lag_seconds"]} == {0.0}  # no set_function
    assert "garmexport_build_info" not in got  # Info does not work in multiprocess mode
    assert "process_resident_memory_bytes" not in got  # nor do custom collectors
