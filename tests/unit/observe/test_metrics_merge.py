"""The instance's /metrics joins its readers' series, every kind that
garmexport.observe.metrics exports, each sample labelled with its reader, byte for byte
what the merge before issue 42 gave (parse every reader's text, relabel, render again:
:func:`reference_exposition`); and why prometheus-client's multiprocess mode was not used
(the last test shows what it loses)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from garmexport.observe.exposition import Renderer
from garmexport.observe.health import Health, serve, write_port_file
from garmexport.observe.metrics import Metrics
from garmexport.observe.metrics_merge import SUPERVISOR, ReadersMetrics, merge
from garmexport.observe.reader_probe import ReaderProbe


def reader_registry(partitions: list[int], revoked: list[int] = ()) -> CollectorRegistry:
    """A reader's metrics after some of everything, the ``revoked`` partitions forgotten."""
    registry = CollectorRegistry()
    metrics = Metrics.create(registry, wall_s=lambda: 2_000.0)
    for p in [*partitions, *revoked]:
        metrics.assign_partition("t", p)
        metrics.consumed("t", p, 10)
        metrics.set_lag("t", p, 100, 40)
        metrics.set_lag_time("t", p, True, 1_000_000)  # 1000 s old at the wall clock
        metrics.committed("fs", p, 7, 1.5)
        metrics.set_watermark("fs", p, 6)
        metrics.already_committed("fs", p, 2)
    metrics.published("fs", "data", 5, 100, 0.2)
    metrics.recovered("assign", 0.3)
    metrics.set_writers(1, 2, 300, 4.0)
    for p in revoked:
        metrics.forget_partition("t", p)
    return registry


def labelled(reader: str, registry: CollectorRegistry) -> str:
    """What a reader answers its supervisor: ``/metrics?reader=<reader>``."""
    return Renderer({"reader": reader}).render(registry)


def samples(families) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list] = {}
    for family in families:
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


# -- the reference: the merge before issue 42 --------------------------------------------

def reference_merge(texts: list[tuple[str, str]]) -> list[Metric]:
    """Families of the plain texts ``(reader, text)``, parsed, joined by name, every
    sample labelled ``reader`` (the former ``metrics_merge.merge``)."""
    families: dict[str, Metric] = {}
    for reader, text in texts:
        for family in text_string_to_metric_families(text):
            joined = families.get(family.name)
            if joined is None:
                joined = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit)
            joined.samples += [s._replace(labels={**s.labels, "reader": reader})
                               for s in family.samples]
    return list(families.values())


def reference_exposition(own: CollectorRegistry,
                         readers: list[tuple[str, CollectorRegistry | None]]) -> str:
    """The instance's /metrics as the former ReadersCollector made it: the supervisor's
    own text and every answering reader's (None: did not answer), merged, then
    ``garmexport_reader_scrape_ok``, rendered by generate_latest."""
    texts = [(SUPERVISOR, generate_latest(own).decode())]
    scrape_ok = GaugeMetricFamily(
        "garmexport_reader_scrape_ok", "1 if the reader answered this scrape of the "
        "instance's /metrics (its series are missing when 0).", labels=["reader"])
    for name, registry in readers:
        scrape_ok.add_metric([name], 0 if registry is None else 1)
        if registry is not None:
            texts.append((name, generate_latest(registry).decode()))
    merged = [*reference_merge(texts), scrape_ok]
    instance = CollectorRegistry()
    instance.register(type("Fixed", (), {"collect": lambda self: iter(merged)})())
    return generate_latest(instance).decode()


def new_exposition(own: CollectorRegistry, readers: list[tuple[str, CollectorRegistry | None]],
                   renderers: dict[str, Renderer] | None = None) -> str:
    """The same from the readers' labelled texts, as ReadersMetrics joins them
    (``renderers``: the readers' own, which keep their lines between scrapes)."""
    renderers = renderers or {}
    scrape_ok = GaugeMetricFamily(
        "garmexport_reader_scrape_ok", "1 if the reader answered this scrape of the "
        "instance's /metrics (its series are missing when 0).", labels=["reader"])
    for name, registry in readers:
        scrape_ok.add_metric([name], 0 if registry is None else 1)
    fixed = CollectorRegistry()
    fixed.register(type("Fixed", (), {"collect": lambda self: iter([scrape_ok])})())
    texts = [renderers.get(name, Renderer({"reader": name})).render(registry)
             for name, registry in readers if registry is not None]
    return merge([labelled(SUPERVISOR, own), *texts]) + generate_latest(fixed).decode()


def masked(text: str) -> str:
    """``text`` with the values of process_* samples (read from /proc at each render) out."""
    return re.sub(r"^(process_\w+(?:\{[^}]*\})?) .*$", r"\1 X", text, flags=re.M)


def own_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    return registry


# -- what the merge gives ------------------------------------------------------------------

def test_every_family_of_every_reader_comes_through_once_labelled() -> None:
    texts = [labelled("r0", reader_registry([0], revoked=[1])),
             labelled("r1", reader_registry([1]))]
    text = merge(texts)
    merged = list(text_string_to_metric_families(text))
    names = [family.name for family in merged]
    assert len(names) == len(set(names))
    one = {family.name for family in text_string_to_metric_families(texts[1])}
    assert set(names) == one
    got = samples(merged)
    # counters and histograms: one series per reader, values intact
    consumed = {(lab["reader"], lab["partition"]): v
                for lab, v in got["garmexport_events_consumed_total"]}
    assert consumed == {("r0", "0"): 10, ("r0", "1"): 10, ("r1", "1"): 10}
    skipped = {(lab["reader"], lab["partition"]): v
               for lab, v in got["garmexport_events_already_committed_total"]}
    assert skipped == {("r0", "0"): 2, ("r0", "1"): 2, ("r1", "1"): 2}
    counts = Counter(lab["reader"] for lab, _ in got["garmexport_publish_duration_seconds_count"])
    assert counts == Counter({"r0": 1, "r1": 1})
    # a revoked partition's gauges are under its new owner only
    lag = {(lab["reader"], lab["partition"]): v for lab, v in got["garmexport_consumer_lag_offsets"]}
    assert lag == {("r0", "0"): 60, ("r1", "1"): 60}
    committed = {(lab["reader"], lab["partition"]): v
                 for lab, v in got["garmexport_committed_offset"]}
    assert committed == {("r0", "0"): 7, ("r1", "1"): 7}
    # the lag in seconds is aged at scrape time, the build is an Info, process_* a collector
    assert {v for _, v in got["garmexport_consumer_lag_seconds"]} == {1000.0}
    assert {lab["reader"] for lab, _ in got["garmexport_build_info"]} == {"r0", "r1"}
    assert {lab["reader"] for lab, _ in got["process_resident_memory_bytes"]} == {"r0", "r1"}


def test_it_is_what_parsing_and_relabelling_every_reader_gave() -> None:
    own = own_registry()
    readers = [("r0", reader_registry([0, 2], revoked=[1])), ("r1", None),
               ("r2", reader_registry([1, 3]))]
    new = new_exposition(own, readers)
    assert masked(new) == masked(reference_exposition(own, readers))
    assert len(new.splitlines()) > 200


partitions = st.integers(0, 5)
types = st.sampled_from(["fs", "jvm_gc", "state", 'q"u\\o}te\n'])
reader_ops = st.lists(st.one_of(
    st.tuples(st.just("consumed"), partitions, st.integers(0, 10**6)),
    st.tuples(st.just("lag"), partitions, st.integers(0, 10**9), st.integers(0, 10**9)),
    st.tuples(st.just("lag_time"), partitions, st.booleans(), st.integers(0, 3_000_000)),
    st.tuples(st.just("committed"), types, partitions, st.integers(-1, 10**12),
              st.floats(0, 2e9)),
    st.tuples(st.just("watermark"), types, partitions, st.integers(-1, 10**12)),
    st.tuples(st.just("skipped"), types, partitions, st.integers(0, 10**6)),
    st.tuples(st.just("assign"), partitions),
    st.tuples(st.just("forget"), partitions),
    st.tuples(st.just("published"), types, st.sampled_from(["data", "quarantine"]),
              st.integers(0, 10**6), st.floats(0, 300)),
    st.tuples(st.just("marker"), partitions, st.booleans()),
    st.tuples(st.just("quarantined"), types, st.sampled_from(["bad_body", "short_head"])),
    st.tuples(st.just("fenced"), partitions),
), max_size=25)


def apply(metrics: Metrics, ops: list[tuple]) -> None:
    for op, *args in ops:
        if op == "consumed":
            metrics.consumed("t", *args)
        elif op == "lag":
            metrics.set_lag("t", *args)
        elif op == "lag_time":
            metrics.set_lag_time("t", *args)
        elif op == "committed":
            metrics.committed(*args)
        elif op == "watermark":
            metrics.set_watermark(*args)
        elif op == "skipped":
            metrics.already_committed(*args)
        elif op == "assign":
            metrics.assign_partition("t", *args)
        elif op == "forget":
            metrics.forget_partition("t", *args)
        elif op == "published":
            type_, kind, rows, duration_s = args
            metrics.published(type_, kind, rows, rows * 100, duration_s)
        elif op == "marker":
            metrics.marker_written(*args)
        elif op == "quarantined":
            metrics.quarantined(*args)
        elif op == "fenced":
            metrics.fencing_conflict(*args)


@settings(max_examples=40, deadline=None)
@given(readers=st.lists(st.tuples(st.booleans(), st.lists(reader_ops, min_size=1, max_size=3)),
                        min_size=1, max_size=3))
def test_on_any_readers_state_it_is_what_the_former_merge_gave(
        readers: list[tuple[bool, list[list[tuple]]]]) -> None:
    """Readers in any state (some not answering), scraped after each round of calls, so
    that the readers' kept lines meet changed values: the same bytes as the reference."""
    own = own_registry()
    states = []
    for answering, _ in readers:
        registry = CollectorRegistry()
        states.append((Metrics.create(registry, wall_s=lambda: 2_500.0), registry, answering))
    renderers = {f"r{i}": Renderer({"reader": f"r{i}"}) for i in range(len(readers))}
    for round_ in range(max(len(rounds) for _, rounds in readers)):
        for (metrics, _, _), (_, rounds) in zip(states, readers):
            apply(metrics, rounds[round_] if round_ < len(rounds) else [])
        listed = [(f"r{i}", registry if answering else None)
                  for i, (_, registry, answering) in enumerate(states)]
        new = new_exposition(own, listed, renderers)
        assert masked(new) == masked(reference_exposition(own, listed))


def test_text_that_is_not_an_exposition_of_families_is_refused() -> None:
    with pytest.raises(ValueError, match="not an exposition"):
        merge(["garmexport_up 1.0\n"])
    with pytest.raises(ValueError, match="TYPE"):
        merge(["# HELP garmexport_up up\ngarmexport_up 1.0\n"])
    assert merge(["", "# HELP a a\n# TYPE a gauge\n", "# HELP a b\n# TYPE a gauge\na 1.0\n"]) == (
        "# HELP a a\n# TYPE a gauge\na 1.0\n")


def test_the_instance_metrics_scrape_serving_readers_and_say_which_did_not_answer(
        tmp_path: Path) -> None:
    registries = [reader_registry([0, 2]), reader_registry([1])]
    servers = [serve("127.0.0.1", 0, registry, Health(live_timeout_s=10))
               for registry in registries]
    try:
        for name, server in zip(("r0", "r2"), servers):
            write_port_file(str(tmp_path / f"{name}.port"), server.port)
        probe = ReaderProbe({name: str(tmp_path / f"{name}.port") for name in ("r0", "r1", "r2")})
        instance = ReadersMetrics(probe)
        instance_server = serve("127.0.0.1", 0, instance, Health(live_timeout_s=10))
        try:
            import urllib.request

            body = urllib.request.urlopen(
                f"http://127.0.0.1:{instance_server.port}/metrics", timeout=10).read().decode()
        finally:
            instance_server.close()
        # a reader's plain /metrics is the client's, unchanged
        plain = urllib.request.urlopen(
            f"http://127.0.0.1:{servers[0].port}/metrics", timeout=10).read().decode()
    finally:
        for server in servers:
            server.close()
    assert masked(plain) == masked(generate_latest(registries[0]).decode())
    got = samples(text_string_to_metric_families(body))
    assert {lab["reader"]: v for lab, v in got["garmexport_reader_scrape_ok"]} == {
        "r0": 1, "r1": 0, "r2": 1}
    assert {(lab["reader"], lab["partition"]) for lab, _ in got["garmexport_events_consumed_total"]} == {
        ("r0", "0"), ("r0", "2"), ("r2", "1")}
    assert {lab["reader"] for lab, _ in got["process_resident_memory_bytes"]} == {
        "supervisor", "r0", "r2"}
    reference = reference_exposition(
        own_registry(), [("r0", registries[0]), ("r1", None), ("r2", registries[1])])
    assert masked(body) == masked(reference)


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
