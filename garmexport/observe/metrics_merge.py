"""The instance's ``/metrics`` from its readers' (``actors.parallelism`` > 1): every series
of every reader on the one port, each with a ``reader`` label.

Why not prometheus-client's multiprocess mode (DESIGN.md 9.8): four kinds of what
:mod:`garmexport.observe.metrics` exports do not survive it (``remove`` of a revoked
partition's gauges, the lag in seconds that ``set_function`` ages at each scrape, the
``Info`` of the build, the ``process_*`` collector). Here each reader keeps its own
registry, exactly as a single process does, and serves it on its private port; at each
scrape the supervisor reads them all. So nothing is lost, nothing is summed behind the
operator's back (``sum by (partition)`` in PromQL does what the multiprocess modes would
have), and a partition that moves between readers shows up under its new reader only.

How, cheaply (issue 42): the supervisor asks each reader for its text with the label
already in every sample (``/metrics?reader=rK``, rendered by
:mod:`garmexport.observe.exposition`), so that merging is joining text: each text is cut
at its ``# HELP`` lines, the families of one name are joined, no sample is parsed. The
result is, byte for byte, what parsing every reader's plain text, adding the label and
rendering it again gave before (a test keeps it so against that reference).

Invariants: one family per name in the output, in the order the names first appear (the
supervisor's own first), its header the first text's, its samples joined in reader
order; a reader that does not answer contributes no sample, and the supervisor's own
``garmexport_reader_scrape_ok{reader}`` (last) says so (0), so a missing series is told
from a zero one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric

from garmexport.observe.exposition import Renderer
from garmexport.observe.health import reader_metrics_path
from garmexport.observe.reader_probe import ReaderProbe

READER_LABEL = "reader"
#: the ``reader`` label of the supervisor's own series (its process_* families)
SUPERVISOR = "supervisor"
_HELP = "# HELP "


def merge(texts: Iterable[str]) -> str:
    """The families of Prometheus texts (as :mod:`garmexport.observe.exposition` writes
    them, each sample already labelled), joined by name. Raises ValueError on text that
    is not of that shape (every family a ``# HELP`` line, then its ``# TYPE`` line)."""
    heads: dict[str, str] = {}
    bodies: dict[str, list[str]] = {}
    for text in texts:
        if not text:
            continue
        if not text.startswith(_HELP) or not text.endswith("\n"):
            raise ValueError(f"not an exposition of families: {text[:60]!r}")
        blocks = text[len(_HELP):].split("\n" + _HELP)
        last = len(blocks) - 1
        for i, block in enumerate(blocks):
            # ``name doc\n# TYPE name type\n`` and the samples; the split took the last
            # line end of every block but the last
            if i < last:
                block += "\n"
            help_end = block.find("\n")
            type_end = block.find("\n", help_end + 1)
            name = block[:help_end].partition(" ")[0]
            if help_end < 0 or type_end < 0 or not block.startswith(
                    f"# TYPE {name} ", help_end + 1):
                raise ValueError(f"a family without its # TYPE line: {block[:60]!r}")
            samples = block[type_end + 1:]
            if name not in heads:
                heads[name] = _HELP + block[:type_end + 1]
                bodies[name] = []
            if samples:
                bodies[name].append(samples)
    return "".join(heads[name] + "".join(bodies[name]) for name in heads)


class _Families:
    """A collector of given families (to render the supervisor's scrape_ok)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class ReadersMetrics:
    """The body of the instance's ``/metrics`` (a function for
    :func:`garmexport.observe.health.serve`): every reader scraped when called, plus the
    supervisor's own process figures."""

    def __init__(self, probe: ReaderProbe) -> None:
        self._probe = probe
        self._own = CollectorRegistry()
        ProcessCollector(registry=self._own)
        self._own_renderer = Renderer({READER_LABEL: SUPERVISOR})
        self._renderer = Renderer()

    def __call__(self) -> bytes:
        return self.text().encode()

    def text(self) -> str:
        texts = [self._own_renderer.render(self._own)]
        scrape_ok = GaugeMetricFamily(
            "garmexport_reader_scrape_ok", "1 if the reader answered this scrape of the "
            "instance's /metrics (its series are missing when 0).", labels=[READER_LABEL])
        for reader in self._probe.readers:
            answer = self._probe.get(reader, reader_metrics_path(reader))
            ok = answer.status == 200
            scrape_ok.add_metric([reader], 1 if ok else 0)
            if ok:
                texts.append(answer.body.decode())
        return merge(texts) + self._renderer.render(_Families([scrape_ok]))
