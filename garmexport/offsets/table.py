"""The table of ``garmexport offsets``: committed positions against the topic's end.

Pure: it takes what :func:`garmexport.pipeline.recovery.read_partition_state` recovered for each
partition and, when the broker was asked, the end offset of each partition, and builds
rows for the human table and the ``--json`` document. No I/O here.

Per partition a row says:

- ``seek``: where a restart resumes, the seek position of DESIGN.md 4.5 (None: no marker, a
  first run starts at the configured ``source.start``);
- ``low``: W per origin, every event of that origin at or below it is published;
- ``days``: the last published offset of recent chains (origin, kind, day) that reach
  past their origin's W: the "per-day" positions a restart skips by;
- ``end``: the partition's end offset (last offset + 1) read from fetched data, and
  ``lag`` = end - seek, never negative (None without the broker). With no marker yet the
  lag is counted from ``first_run_start`` (the offset a first run would start at);
- ``jvm``: on a root the Garmadon JVM exporter wrote and no marker yet, per type the
  highest offset it committed and the file that gave it: the type resumes after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from garmexport.pipeline.recovery import Recovered


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    seek: int | None
    low: Mapping[str, int]
    days: Mapping[str, Mapping[str, Mapping[str, int]]]  # origin -> kind -> day -> offset
    markers: int
    intents: int
    end: int | None = None
    lag: int | None = None
    jvm: Mapping[str, tuple[int, str]] = field(default_factory=dict)  # origin -> (offset, file)

    def to_dict(self) -> dict[str, object]:
        return {"partition": self.partition, "seek": self.seek, "end": self.end,
                "lag": self.lag, "low": dict(self.low),
                "days": {o: {k: dict(d) for k, d in ks.items()} for o, ks in self.days.items()},
                "markers": self.markers, "intents": self.intents,
                "jvm": {o: {"offset": off, "file": f} for o, (off, f) in self.jvm.items()}}


def build_row(partition: int, recovered: Recovered | None, end: int | None = None,
              first_run_start: int | None = None) -> PartitionRow:
    """One partition's row; ``recovered`` None means nothing under ``_offsets`` for it.

    ``lag`` is ``end - seek`` (``end - first_run_start`` without a marker), clamped at 0;
    None when ``end`` is None or, without a marker, when ``first_run_start`` is None.
    """
    if recovered is None:
        seek, low, days, markers, intents = None, {}, {}, 0, 0
    else:
        state = recovered.state
        seek = state.seek()
        low = dict(sorted(state.low.items()))
        days: dict[str, dict[str, dict[str, int]]] = {}
        for chain, offset in sorted(state.last.items()):
            days.setdefault(chain.origin, {}).setdefault(chain.kind, {})[chain.day] = offset
        markers, intents = len(recovered.markers), len(recovered.intents)
    jvm = {} if recovered is None else {o: (f.offset, f.path)
                                        for o, f in sorted(recovered.jvm.items())}
    start = seek if seek is not None else first_run_start
    lag = None if end is None or start is None else max(0, end - start)
    return PartitionRow(partition, seek, low, days, markers, intents, end, lag, jvm)


def to_json(cluster: str, topic: str, rows: list[PartitionRow]) -> dict[str, object]:
    """The ``--json`` document; ``total_lag`` is None when any partition's lag is unknown."""
    lags = [r.lag for r in rows]
    total = None if any(lag is None for lag in lags) else sum(lags)  # type: ignore[arg-type]
    return {"cluster": cluster, "topic": topic, "total_lag": total,
            "partitions": [r.to_dict() for r in rows]}


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def render(cluster: str, topic: str, rows: list[PartitionRow]) -> str:
    """The human table: one line per partition, then its origins grouped by W (all origins
    usually share one after a heartbeat), then the recent per-day offsets of each origin."""
    lines = [f"committed offsets of {cluster}+{topic}",
             f"{'partition':>9} {'seek':>12} {'end':>12} {'lag':>10} {'markers':>7} {'intents':>7}"]
    for r in rows:
        lines.append(f"{r.partition:>9} {_cell(r.seek):>12} {_cell(r.end):>12} "
                     f"{_cell(r.lag):>10} {r.markers:>7} {r.intents:>7}")
        if not r.low:
            lines.append(f"{'':>11}no marker: a first run starts at source.start")
            continue
        if r.jvm:
            lines.append(f"{'':>11}no marker yet: resumes where the JVM exporter stopped; "
                         "other types from the seek")
            for origin, (offset, path) in r.jvm.items():
                lines.append(f"{'':>11}{origin:<30} after {offset:<12} from {path}")
            continue
        by_low: dict[int, list[str]] = {}
        for origin, w in r.low.items():
            by_low.setdefault(w, []).append(origin)
        for w, origins in sorted(by_low.items()):
            who = (f"every origin ({len(origins)})" if len(origins) == len(r.low)
                   else ", ".join(origins))
            lines.append(f"{'':>11}W={w:<12} {who}")
        for origin, kinds in r.days.items():
            recent = " ".join(f"{kind}:{day}={offset}" for kind, by_day in sorted(kinds.items())
                              for day, offset in sorted(by_day.items()))
            lines.append(f"{'':>11}{origin:<30} last per day: {recent}")
    return "\n".join(lines)
