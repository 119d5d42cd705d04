"""The cheap renderer writes what prometheus-client's ``generate_latest`` writes, byte for
byte, labels added where asked; a Table is a labelled Gauge or Counter of the client's."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import (
    CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, Summary, generate_latest,
)
from prometheus_client.parser import text_string_to_metric_families

from garmexport.observe.exposition import Renderer, Table, render

# label values as a client may see them: quotes, backslashes, newlines, braces, unicode
label_values = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 1.0, 1e6, 1234567.0, 1.7953e9, 1795300000.25, 123456789012.0, 1e-7, -3e8])
amounts = st.floats(min_value=0, max_value=1e12) | st.integers(0, 10**9)


def with_label(text: str, label: str, value: str) -> str:
    """``text`` as the client would write it with ``label="value"`` on every sample: the
    reference for :class:`Renderer` with labels (parsed, relabelled, rendered again)."""
    registry = CollectorRegistry()
    families = list(text_string_to_metric_families(text))
    for family in families:
        family.samples = [s._replace(labels={**s.labels, label: value}) for s in family.samples]
    registry.register(type("Fixed", (), {"collect": lambda self: iter(families)})())
    return generate_latest(registry).decode()


@st.composite
def client_registries(draw: st.DrawFn) -> CollectorRegistry:
    """A registry of every kind of client metric, with labels and values drawn."""
    registry = CollectorRegistry()
    values = draw(st.lists(label_values, min_size=1, max_size=4))
    gauge = Gauge("g", "a gauge \\ with\nodd help", ["a", "b"], registry=registry)
    counter = Counter("c", "a counter", ["a"], registry=registry)
    histogram = Histogram("h", "a histogram", ["a"], buckets=(0.1, 1, 10), registry=registry)
    summary = Summary("s", "a summary", registry=registry)
    Gauge("plain", "no labels", registry=registry).set(draw(floats))
    Gauge("empty", "labels, no child", ["x"], registry=registry)
    Info("build", "an info", registry=registry).info({"version": draw(label_values)})
    Enum("state", "an enum", states=["up", "down"], registry=registry).state("down")
    for value in values:
        gauge.labels(value, draw(label_values)).set(draw(floats))
        counter.labels(value).inc(draw(amounts))
        histogram.labels(value).observe(draw(st.floats(0, 100)))
        summary.observe(draw(st.floats(0, 100)))
    return registry


@settings(max_examples=60, deadline=None)
@given(registry=client_registries())
def test_without_labels_it_writes_what_generate_latest_writes(registry: CollectorRegistry) -> None:
    assert render(registry) == generate_latest(registry).decode()


@settings(max_examples=60, deadline=None)
@given(registry=client_registries(), reader=st.sampled_from(["r0", "r12", "supervisor", 'q"\\\n']))
def test_with_a_label_it_writes_what_relabelling_the_client_text_gives(
        registry: CollectorRegistry, reader: str) -> None:
    renderer = Renderer({"reader": reader})
    for _ in range(2):  # the second from the kept line heads
        assert renderer.render(registry) == with_label(
            generate_latest(registry).decode(), "reader", reader)


def test_a_label_the_samples_have_already_or_a_name_outside_the_legacy_set_is_refused() -> None:
    registry = CollectorRegistry()
    Gauge("g", "g", ["reader"], registry=registry).labels("r0").set(1)
    with pytest.raises(ValueError, match="twice"):
        render(registry, {"reader": "r1"})
    with pytest.raises(ValueError, match="legacy"):
        Renderer({"bad-name": "x"}).render(registry)


# -- Table: a client Gauge or Counter with labels ---------------------------------------

ops = st.lists(st.tuples(st.sampled_from(["set", "inc", "touch", "remove"]),
                         st.sampled_from(["fs", "jvm_gc", 'o"d\\d\n}']), st.integers(0, 3),
                         amounts), max_size=30)


def families(kind: str) -> tuple[CollectorRegistry, Table, CollectorRegistry, Counter | Gauge]:
    """A Table and the client family it stands for, each on a registry of its own."""
    table_registry, client_registry = CollectorRegistry(), CollectorRegistry()
    table = Table(f"garmexport_x{'_total' if kind == 'counter' else ''}", "doc \\ and\nmore",
                  ("type", "partition"), kind, table_registry, wall_s=lambda: 1_795_300_000.5)
    client = (Counter if kind == "counter" else Gauge)(
        "garmexport_x", "doc \\ and\nmore", ["type", "partition"], registry=client_registry)
    return table_registry, table, client_registry, client


def run_ops(ops: list, table: Table, client: Counter | Gauge) -> None:
    for op, type_, partition, amount in ops:
        if op == "set" and table.kind == "gauge":
            table.set((type_, partition), amount)
            client.labels(type_, partition).set(amount)
        elif op == "inc":
            table.inc((type_, partition), amount)
            client.labels(type_, partition).inc(amount)
        elif op == "touch":
            table.touch((type_, partition))
            client.labels(type_, partition)
        elif op == "remove":
            table.remove_where("partition", partition)
            for labels in [k for k in client._metrics if k[1] == str(partition)]:
                client.remove(*labels)


def without_created_values(text: str) -> str:
    # the client's _created is its time.time() at the child's birth, the table's its clock
    return "\n".join(line.rsplit(" ", 1)[0] if "_created{" in line else line
                     for line in text.splitlines())


@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(["gauge", "counter"]), rounds=st.lists(ops, min_size=1, max_size=3))
def test_a_table_shows_what_a_client_family_with_the_same_calls_shows(
        kind: str, rounds: list[list]) -> None:
    table_registry, table, client_registry, client = families(kind)
    renderer = Renderer({"reader": "r1"})
    for ops_of_round in rounds:  # later rounds change values the renderer has lines for
        run_ops(ops_of_round, table, client)
        text = generate_latest(table_registry).decode()
        assert without_created_values(text) == without_created_values(
            generate_latest(client_registry).decode())
        assert render(table_registry) == text
        assert renderer.render(table_registry) == with_label(text, "reader", "r1")


def test_a_table_renders_a_value_again_only_when_it_changed() -> None:
    registry = CollectorRegistry()
    table = Table("t", "t", ("type", "partition"), "gauge", registry, wall_s=lambda: 0.0)
    renderer = Renderer({"reader": "r0"})
    table.set(("fs", 1), 5)
    table.set(("fs", 2), -0.0)
    assert 't{partition="1",reader="r0",type="fs"} 5.0' in renderer.render(registry)
    table.set(("fs", 1), 7)
    table.set(("fs", 2), 0.0)  # equal to -0.0, written differently
    text = renderer.render(registry)
    assert 't{partition="1",reader="r0",type="fs"} 7.0\n' in text
    assert 't{partition="2",reader="r0",type="fs"} 0.0\n' in text
    table.set(("fs", 1), math.nan)
    assert 't{partition="1",reader="r0",type="fs"} NaN\n' in renderer.render(registry)
    assert table.get(("fs", 2)) == 0.0 and table.get(("fs", 3)) is None


def test_a_table_counter_only_grows_and_a_table_is_a_gauge_or_a_counter() -> None:
    registry = CollectorRegistry()
    table = Table("c_total", "c", ("partition",), "counter", registry, wall_s=lambda: 0.0)
    with pytest.raises(ValueError, match="non-negative"):
        table.inc((1,), -1)
    with pytest.raises(ValueError, match="label values"):
        table.inc((1, 2))
    with pytest.raises(ValueError, match="gauge or a counter"):
        Table("h", "h", ("partition",), "histogram", registry, wall_s=lambda: 0.0)


def test_a_registry_refuses_a_table_and_a_family_of_the_same_name() -> None:
    registry = CollectorRegistry()
    Table("c_total", "c", ("partition",), "counter", registry, wall_s=lambda: 0.0)
    with pytest.raises(ValueError, match="Duplicated"):
        Counter("c", "c", registry=registry)


def test_setting_a_table_to_the_value_it_has_keeps_its_line() -> None:
    registry = CollectorRegistry()
    table = Table("t", "t", ("partition",), "gauge", registry, wall_s=lambda: 0.0)
    renderer = Renderer()
    table.set((1,), 5)
    renderer.render(registry)
    before = dict(table._lines)
    table.set((1,), 5.0)
    renderer.render(registry)
    assert table._lines == before and all(
        table._lines[k] is before[k] for k in before)  # not written again
    table.set((1,), float("nan"))
    table.set((1,), float("nan"))  # NaN is never equal to itself: set each time
    assert "t{partition=\"1\"} NaN\n" in renderer.render(registry)
