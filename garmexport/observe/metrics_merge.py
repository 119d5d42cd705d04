"""The instance's ``/metrics`` from its readers' (``actors.parallelism`` > 1): every series
of every reader on the one port, each with a ``reader`` label.

Why not prometheus-client's multiprocess mode (DESIGN.md 9.8): four kinds of what
:mod:`garmexport.observe.metrics` exports do not survive it (``remove`` of a revoked
partition's gauges, the lag in seconds that ``set_function`` ages at each scrape, the
``Info`` of the build, the ``process_*`` collector). Here each reader keeps its own
registry, exactly as a single process does, and serves it on its private port; at each
scrape the supervisor reads them all and relabels. So nothing is lost, nothing is summed
behind the operator's back (``sum by (partition)`` in PromQL does what the multiprocess
modes would have), and a partition that moves between readers shows up under its new
reader only.

Invariants: one family per name in the output (the readers' samples of a family are
joined, in reader order); a reader that does not answer contributes no sample, and the
supervisor's own ``garmexport_reader_scrape_ok{reader}`` says so (0), so a missing series
is told from a zero one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from garmexport.observe.health import METRICS_PATH
from garmexport.observe.reader_probe import ReaderProbe

READER_LABEL = "reader"
#: the ``reader`` label of the supervisor's own series (its process_* families)
SUPERVISOR = "supervisor"


def merge(texts: Iterable[tuple[str, str]]) -> list[Metric]:
    """Families of the Prometheus texts ``(reader, text)``, joined by name, every sample
    labelled ``reader``. Raises ValueError on text that is not the exposition format."""
    families: dict[str, Metric] = {}
    for reader, text in texts:
        for family in text_string_to_metric_families(text):
            joined = families.get(family.name)
            if joined is None:
                joined = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit)
            joined.samples += [s._replace(labels={**s.labels, READER_LABEL: reader})
                               for s in family.samples]
    return list(families.values())


class ReadersCollector:
    """A custom collector (register it on a registry) that scrapes every reader when
    collected, plus the supervisor's own process figures."""

    def __init__(self, probe: ReaderProbe) -> None:
        self._probe = probe
        self._own = CollectorRegistry()
        ProcessCollector(registry=self._own)

    def collect(self) -> Iterator[Metric]:
        texts = [(SUPERVISOR, generate_latest(self._own).decode())]
        scrape_ok = GaugeMetricFamily(
            "garmexport_reader_scrape_ok", "1 if the reader answered this scrape of the "
            "instance's /metrics (its series are missing when 0).", labels=[READER_LABEL])
        for answer in self._probe.get_all(METRICS_PATH):
            ok = answer.status == 200
            scrape_ok.add_metric([answer.reader], 1 if ok else 0)
            if ok:
                texts.append((answer.reader, answer.body.decode()))
        yield from merge(texts)
        yield scrape_ok
