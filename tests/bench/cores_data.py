"""Batches as the exporter's writers get them, for the several-cores measurements.

``gil_release.py`` and ``handoff_cost.py`` measure single CPU steps of the exporter on the
benchmark's workload: generator records (the default type mix, 5 % late, ``bad_share``
bad) produced in memory, not through a broker, cut per event type into batches of
``writer.decode_batch_records`` (8192) in offset order, as the reader hands them over. A
batch of the most frequent type is the unit of work; each step gets its input prepared
once, so only the step itself is timed.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from garmexport.wire.events import REGISTRY, EventType  # noqa: E402
from garmexport.wire.frames import DecodeFailure, read_head  # noqa: E402
from garmexport.testbed.generator import Spec, generate  # noqa: E402

BATCH = 8192
NOW_MS = 1_795_300_000_000


@dataclass(frozen=True)
class Batch:
    event_type: EventType
    values: list[bytes]
    offsets: list[int]

    @property
    def nbytes(self) -> int:
        return sum(map(len, self.values))


def batches(count: int = 4, bad_share: float = 0.002, batch: int = BATCH) -> list[Batch]:
    """``count`` full batches of the most frequent exported type (frames whose head is
    good; bad headers and bodies stay in, as they reach the decoder)."""
    by_marker: dict[int, list[tuple[bytes, int]]] = {}
    seen: Counter[int] = Counter()
    for offset, r in enumerate(generate(Spec(now_ms=NOW_MS, bad_share=bad_share),
                                        count * batch * 4)):
        head = read_head(r.value)
        if isinstance(head, DecodeFailure) or REGISTRY[head[0]].output is None:
            continue
        by_marker.setdefault(head[0], []).append((r.value, offset))
        seen[head[0]] += 1
    marker, _ = seen.most_common(1)[0]
    pairs = by_marker[marker]
    if len(pairs) < count * batch:
        raise RuntimeError(f"only {len(pairs)} records of the most frequent type")
    return [Batch(REGISTRY[marker], [v for v, _ in pairs[i * batch:(i + 1) * batch]],
                  [o for _, o in pairs[i * batch:(i + 1) * batch]]) for i in range(count)]


def median(values: list[float]) -> float:
    return statistics.median(values)


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])
