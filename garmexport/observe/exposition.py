"""The Prometheus text format of a registry, cheaply, with labels added to every sample;
and :class:`Table`, a labelled family that renders its samples without building them.

Why (issue 42): at 128 partitions a reader holds some 6,700 samples, most of them the
gauges and counter of a (type, partition); prometheus-client builds a ``Sample`` (and a
label dict) for each at every scrape and formats each label again, and the supervisor then
parsed every reader's text and rendered it once more: about 0.5 CPU-s per scrape. Here:

- :func:`render` writes what ``generate_latest`` writes, byte for byte (a test keeps it
  so), plus ``labels`` (the supervisor asks each reader for its text with
  ``reader="rK"`` already in every sample, so that merging is joining text,
  :mod:`garmexport.observe.metrics_merge`). The ``name{labels} `` head of each line is
  kept between scrapes, keyed by the sample's name and labels;
- a :class:`Table` keeps its values in a dict and renders its lines from it, the head of
  each line kept too; a generic caller (``generate_latest``, the text parser in tests)
  still gets ordinary ``Sample`` objects, built only when it asks for them.

Invariants: names of metrics and labels are the legacy Prometheus names (garmexport's all
are; another raises ValueError rather than be rendered differently from the client);
``labels`` must not name a label the samples already have (ValueError). A counter
:class:`Table` has its ``_created`` series as a client ``Counter`` has by default (this
module does not follow ``PROMETHEUS_DISABLE_CREATED_SERIES``).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

_LEGACY_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LEGACY_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
#: samples that the text format puts in a gauge family of their own after their family's
_TRAILING = ("_created", "_gsum", "_gcount")
#: the text format's name and type of a family, from the client's (OpenMetrics) ones
_TEXT_TYPE = {"info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram",
              "unknown": "untyped"}

Labels = tuple[tuple[str, str], ...]
#: a table's series at a collect: label values -> [value, created] (the dict is a copy;
#: the lists are the table's, so a value set since shows its newer self)
_Snapshot = dict[tuple[str, ...], list[float]]


def _legacy_metric(name: str) -> str:
    if not _LEGACY_METRIC.match(name):
        raise ValueError(f"metric name {name!r} is not a legacy Prometheus name")
    return name


def _label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _doc(documentation: str) -> str:
    return documentation.replace("\\", r"\\").replace("\n", r"\n")


def line_head(name: str, labels: Iterable[tuple[str, str]], extra: Labels) -> str:
    """``name{labels} `` as the text format writes it: labels sorted by name (``extra``
    among them), values escaped; ``name `` when there is none."""
    pairs = sorted([*labels, *extra])
    for i, (label, _) in enumerate(pairs):
        if not _LEGACY_LABEL.match(label):
            raise ValueError(f"label name {label!r} is not a legacy Prometheus name")
        if i and pairs[i - 1][0] == label:
            raise ValueError(f"label {label!r} twice on a sample of {name}")
    _legacy_metric(name)
    if not pairs:
        return name + " "
    return name + "{" + ",".join(f'{k}="{_label_value(v)}"' for k, v in pairs) + "} "


def _value_tail(value: float, timestamp: Any) -> str:
    if timestamp is None:
        return floatToGoString(value) + "\n"
    return f"{floatToGoString(value)} {int(float(timestamp) * 1000):d}\n"


def _header(name: str, documentation: str, text_type: str) -> str:
    name = _legacy_metric(name)
    return f"# HELP {name} {_doc(documentation)}\n# TYPE {name} {text_type}\n"


class Renderer:
    """Renders registries with ``labels`` added to every sample, keeping the head of every
    line it wrote (one per series; a series gone stays in the cache until :meth:`clear`,
    which is only memory: a few hundred bytes a series)."""

    def __init__(self, labels: Mapping[str, str] | None = None) -> None:
        self.extra: Labels = tuple(sorted((labels or {}).items()))
        self._heads: dict[tuple[str, ...], str] = {}
        self._lock = threading.Lock()  # two scrapes at once share the cache

    def clear(self) -> None:
        with self._lock:
            self._heads = {}

    def render(self, registry: Collector) -> str:
        """The text format of ``registry`` (or any collector): ``generate_latest(registry)``
        with the labels added. Raises ValueError on a name that is not a legacy Prometheus
        one, or on a sample that has one of the labels already."""
        out: list[str] = []
        for metric in registry.collect():
            if isinstance(metric, TableFamily):
                out.append(metric.text(self))
                continue
            name, text_type = metric.name, metric.type
            if text_type == "counter":
                name += "_total"
            elif text_type == "info":
                name += "_info"
            text_type = _TEXT_TYPE.get(text_type, text_type)
            out.append(_header(name, metric.documentation, text_type))
            trailing: dict[str, list[str]] = {}
            for sample in metric.samples:
                line = self.head(sample.name, sample.labels) + _value_tail(
                    sample.value, sample.timestamp)
                suffix = sample.name[len(metric.name):]
                if suffix in _TRAILING and sample.name == metric.name + suffix:
                    trailing.setdefault(suffix, []).append(line)
                else:
                    out.append(line)
            for suffix, lines in sorted(trailing.items()):
                out.append(_header(metric.name + suffix, metric.documentation, "gauge"))
                out.extend(lines)
        return "".join(out)

    def head(self, name: str, labels: Mapping[str, str]) -> str:
        key = (name, *labels.keys(), *labels.values())
        head = self._heads.get(key)
        if head is None:
            head = line_head(name, labels.items(), self.extra)
            with self._lock:
                self._heads[key] = head
        return head


def render(registry: Collector, labels: Mapping[str, str] | None = None) -> str:
    """:meth:`Renderer.render` with a fresh cache (a server keeps one :class:`Renderer`)."""
    return Renderer(labels).render(registry)


class Table:
    """One gauge or counter family of labelled values, a collector (it registers itself on
    ``registry``), for families of many series: its lines come from a dict of values, the
    head of each line kept. The client's semantics: a label value is ``str()`` of what
    is passed; a counter only grows (ValueError on a negative increment) and has
    ``_total`` and ``_created`` samples; series are kept in the order they appeared.
    Thread-safe (writers and scrapes in different threads)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...],
                 kind: str, registry: CollectorRegistry,
                 wall_s: Callable[[], float]) -> None:
        if kind not in ("gauge", "counter"):
            raise ValueError(f"a Table is a gauge or a counter, not {kind!r}")
        for label in labelnames:
            if not _LEGACY_LABEL.match(label) or label.startswith("__"):
                raise ValueError(f"label name {label!r} is not a legacy Prometheus name")
        self.name = _legacy_metric(name.removesuffix("_total") if kind == "counter" else name)
        self.documentation = documentation
        self.labelnames = labelnames
        self.kind = kind
        self._wall_s = wall_s
        self._lock = threading.Lock()
        #: label values -> [value, created]
        self._series: dict[tuple[str, ...], list[float]] = {}
        #: (labels added, label values) -> (head of the value line, the created line,
        #: the value of the value line, the value line), each written once
        self._lines: dict[tuple[Labels, tuple[str, ...]], tuple[str, str, float, str]] = {}
        registry.register(self)

    def _key(self, values: tuple[Any, ...]) -> tuple[str, ...]:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(values)} label values for {self.labelnames}")
        return tuple(str(v) for v in values)

    def _child(self, key: tuple[str, ...]) -> list[float]:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0.0, self._wall_s()]
        return series

    def set(self, values: tuple[Any, ...], value: float) -> None:
        """The gauge of ``values`` (label values, in ``labelnames`` order) is ``value``."""
        key, value = self._key(values), float(value)
        with self._lock:
            series = self._child(key)
            old = series[0]
            # the same value keeps its object, so its line is not written again (a marker
            # repeats the low watermark of every type that got no new data)
            if old != value or math.copysign(1.0, old) != math.copysign(1.0, value):
                series[0] = value

    def inc(self, values: tuple[Any, ...], amount: float = 1) -> None:
        """The counter of ``values`` grows by ``amount`` (>= 0)."""
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        key = self._key(values)
        with self._lock:
            series = self._child(key)
            if amount:  # as in set: an unchanged value keeps its line
                series[0] += float(amount)

    def touch(self, values: tuple[Any, ...]) -> None:
        """The series of ``values`` exists (at 0 if new), as ``labels(...)`` makes it."""
        key = self._key(values)
        with self._lock:
            self._child(key)

    def remove_where(self, label: str, value: Any) -> None:
        """Remove every series whose ``label`` is ``str(value)``."""
        index, wanted = self.labelnames.index(label), str(value)
        with self._lock:
            for key in [k for k in self._series if k[index] == wanted]:
                del self._series[key]
            for line_key in [k for k in self._lines if k[1][index] == wanted]:
                del self._lines[line_key]

    def get(self, values: tuple[Any, ...]) -> float | None:
        """The value of ``values``, None if there is no such series."""
        with self._lock:
            series = self._series.get(self._key(values))
        return None if series is None else series[0]

    def describe(self) -> Iterator[Metric]:
        # the names, without the series: the registry refuses a second family of a name
        yield TableFamily(self, {})

    def collect(self) -> Iterator[Metric]:
        with self._lock:  # a copy of the dict, not of its items: few objects for the GC
            snapshot = dict(self._series)
        yield TableFamily(self, snapshot)

    def lines(self, renderer: Renderer, snapshot: _Snapshot) -> str:
        """The text format of ``snapshot`` (of :meth:`collect`) with ``renderer``'s labels.
        A series' line is written again only when its value is a new object (every
        ``set``/``inc`` stores one), its created line and label heads only once."""
        name, labelnames, extra = self.name, self.labelnames, renderer.extra
        counter = self.kind == "counter"
        total = name + "_total" if counter else name
        lines, fresh = self._lines, {}
        values: list[str] = []
        created: list[str] = []
        for key, (value, born) in snapshot.items():
            cached = lines.get((extra, key))
            if cached is None or cached[2] is not value:
                if cached is None:
                    labels = tuple(zip(labelnames, key))
                    head = line_head(total, labels, extra)
                    born_line = (line_head(name + "_created", labels, extra)
                                 + floatToGoString(born) + "\n") if counter else ""
                else:
                    head, born_line = cached[0], cached[1]
                cached = fresh[(extra, key)] = (
                    head, born_line, value, head + floatToGoString(value) + "\n")
            values.append(cached[3])
            if counter:
                created.append(cached[1])
        if fresh:
            with self._lock:  # only series still there: a removal may have raced
                lines.update({k: c for k, c in fresh.items() if k[1] in self._series})
        text = _header(total, self.documentation, self.kind) + "".join(values)
        if created:  # as the client: no _created family without a series
            text += _header(name + "_created", self.documentation, "gauge") + "".join(created)
        return text


class TableFamily(Metric):
    """What :meth:`Table.collect` yields: a family whose ``samples`` are built when read
    (by a generic caller), and that :class:`Renderer` renders from its values."""

    def __init__(self, table: Table, snapshot: _Snapshot) -> None:
        super().__init__(table.name, table.documentation, table.kind)
        self._table, self._snapshot = table, snapshot

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        table = self._table
        out = []
        for key, (value, created) in self._snapshot.items():
            labels = dict(zip(table.labelnames, key))
            if table.kind == "counter":
                out.append(Sample(table.name + "_total", labels, value))
                out.append(Sample(table.name + "_created", dict(labels), created))
            else:
                out.append(Sample(table.name, labels, value))
        return out

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        # Metric.__init__ starts an empty list; the samples are the snapshot's
        if value:
            raise ValueError("a TableFamily's samples are its table's")

    def text(self, renderer: Renderer) -> str:
        return self._table.lines(renderer, self._snapshot)
