"""A deterministic stream of Garmadon records for tests, benchmarks and the demo.

:func:`generate` turns a :class:`Spec` and a count into Kafka records (partition, key None,
value, Kafka timestamp) whose values are real Garmadon frames of all 20 known types, in a
configurable mix, plus an optional share of malformed records of every kind the exporter
must quarantine. Each record carries ``kind`` (the event type name, or the
:class:`~garmexport.wire.frames.Reason` value of a malformed record), so a test can compare what
was produced with what came out; :class:`Tally` counts them.

Invariants:

- Same spec, same count: the same records, byte for byte (one seeded ``random.Random``; the
  clock is ``Spec.now_ms``, never read here).
- Kafka timestamps rise with the record index from ``now_ms - days`` to ``now_ms``. Event
  timestamps follow them, a few seconds behind; a ``late_share`` of events is dated on an
  earlier UTC day than the stream has reached (only possible once the stream left its first
  day), so older days keep receiving events after newer ones.
- ``frames.decode(record.value)`` gives a frame of type ``kind``, or a failure whose reason
  is ``kind``: the labels are exact, not intended.
"""

from __future__ import annotations

import collections
import itertools
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from garmexport.wire import frames
from garmexport.wire.events import REGISTRY, EventType
from garmexport.wire.frames import Reason
from garmexport.testbed.generator_messages import body, header_family, headers

DAY_MS = 86_400_000
_JITTER_MS = 5_000  # an agent's event reaches Kafka within a few seconds
_BODIES_PER_TYPE = 64  # distinct bodies per type: enough variety, cheap per record

#: Default weights by type name: container monitoring, JVM/GC, FS and Spark tasks dominate,
#: Flink and YARN are rare, FLINK_KAFKA_CONSUMER_EVENT is very rare (a rare type holds the
#: exporter's low watermark back: it must be exercised).
DEFAULT_MIX: Mapping[str, float] = {
    "CONTAINER_MONITORING_EVENT": 30, "FS_EVENT": 15, "GC_EVENT": 12, "JVMSTATS_EVENT": 12,
    "SPARK_TASK_EVENT": 12, "SPARK_STAGE_EVENT": 2, "SPARK_STAGE_STATE_EVENT": 2,
    "SPARK_EXECUTOR_STORAGE_STATUS_EVENT": 2, "SPARK_EXECUTOR_STATE_EVENT": 1,
    "SPARK_RDD_STORAGE_STATUS_EVENT": 1, "CONTAINER_EVENT": 1, "APPLICATION_EVENT": 0.5,
    "FLINK_TASK_EVENT": 0.5, "FLINK_OPERATOR_EVENT": 0.5, "FLINK_JOB_MANAGER_EVENT": 0.3,
    "FLINK_JOB_EVENT": 0.3, "FLINK_TASK_MANAGER_EVENT": 0.3, "FLINK_KAFKA_CONSUMER_EVENT": 0.02,
    "PATH_EVENT": 0.5, "STATE_EVENT": 0.3,
}
BAD_KINDS: tuple[Reason, ...] = (
    Reason.NULL_VALUE, Reason.EMPTY_VALUE, Reason.SHORT_HEAD, Reason.LENGTH_MISMATCH,
    Reason.UNKNOWN_MARKER, Reason.BAD_HEADER, Reason.BAD_BODY)
PARTITIONERS = ("round_robin", "application")
_UNKNOWN_MARKERS = (2, 999, 6000, -1)
# A length-delimited field 1 announcing 127 bytes followed by 4: a truncated message that
# every protobuf parser rejects, whatever the message type.
_BROKEN_MESSAGE = b"\x0a\x7fxxxx"
_BY_NAME = {t.name: t for t in REGISTRY.values()}


@dataclass(frozen=True)
class Spec:
    """What to generate. ``now_ms`` is the end of the time window (epoch ms)."""

    now_ms: int
    seed: int = 1
    partitions: int = 4
    days: float = 3  # fractions too: 0.5 is 12 hours
    late_share: float = 0.05
    bad_share: float = 0.0
    mix: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))
    partitioner: str = "round_robin"  # or "application": all events of an app on one partition
    apps: int = 50

    def __post_init__(self) -> None:
        if self.partitions < 1 or self.apps < 1:
            raise ValueError("partitions and apps must be at least 1")
        if not self.days > 0:
            raise ValueError(f"days must be more than 0, got {self.days}")
        for name in ("late_share", "bad_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be within [0, 1]")
        if self.partitioner not in PARTITIONERS:
            raise ValueError(f"partitioner must be one of {', '.join(PARTITIONERS)}")
        unknown = set(self.mix) - set(_BY_NAME)
        if unknown or any(w < 0 for w in self.mix.values()) or sum(self.mix.values()) <= 0:
            raise ValueError(f"bad mix {dict(self.mix)}: weights >= 0 with a positive sum, "
                             f"names from {', '.join(_BY_NAME)}")


@dataclass(frozen=True)
class Record:
    """One Kafka record to produce; ``kind`` is what it is, for counting (not sent)."""

    partition: int
    value: bytes | None
    timestamp_ms: int  # Kafka CreateTime
    kind: str
    key: None = None


def parse_mix(text: str) -> dict[str, float]:
    """``"fs=10,gc=2,path=1"`` -> weights by type name; unnamed types get 0.

    Names are output names (``fs``), type names (``FS_EVENT``), or ``path``/``state`` for
    the two types without output; ``default`` and ``uniform`` are whole mixes. Raises
    ValueError naming the bad part.
    """
    if text.strip() == "default":
        return dict(DEFAULT_MIX)
    if text.strip() == "uniform":
        return {name: 1.0 for name in _BY_NAME}
    aliases = {t.output: t.name for t in REGISTRY.values() if t.output}
    aliases |= {"path": "PATH_EVENT", "state": "STATE_EVENT"} | {n.lower(): n for n in _BY_NAME}
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = part.partition("=")
        if name.strip().lower() not in aliases:
            raise ValueError(f"unknown event type {name!r} in mix; known: {', '.join(aliases)}")
        try:
            mix[aliases[name.strip().lower()]] = float(weight)
        except ValueError:
            raise ValueError(f"mix entry {part!r}: weight must be a number") from None
    return mix


def generate(spec: Spec, count: int) -> Iterator[Record]:
    """``count`` records as described in the module docstring; lazily, in offset order."""
    rng = random.Random(spec.seed)
    pools = headers(rng, spec.apps)
    weighted = [(_BY_NAME[n], w) for n, w in spec.mix.items() if w > 0]
    types = [t for t, _ in weighted]
    cumulative = list(itertools.accumulate(w for _, w in weighted))
    bodies = {t.marker: [body(rng, t) for _ in range(_BODIES_PER_TYPE)] for t in types}
    families = {t.marker: [h for f in header_family(t) for h in pools[f]] for t in types}
    start = spec.now_ms - int(spec.days * DAY_MS)
    step = spec.days * DAY_MS / max(count, 1)
    for i in range(count):
        kafka_ts = start + int((i + 1) * step)
        event_type = rng.choices(types, cum_weights=cumulative)[0]
        app, header = rng.choice(families[event_type.marker])
        payload = rng.choice(bodies[event_type.marker])
        event_ts = _event_time(rng, spec, start, kafka_ts)
        partition = i % spec.partitions if spec.partitioner == "round_robin" else app % spec.partitions
        if spec.bad_share and rng.random() < spec.bad_share:
            reason = rng.choice(BAD_KINDS)
            value = _malformed(rng, reason, event_type, event_ts, header, payload)
            yield Record(partition, value, kafka_ts, reason.value)
        else:
            yield Record(partition, frames.encode(event_type.marker, event_ts, header, payload),
                         kafka_ts, event_type.name)


def _event_time(rng: random.Random, spec: Spec, start: int, kafka_ts: int) -> int:
    """Event time of a record reaching Kafka at ``kafka_ts``: just before it, or on an
    earlier UTC day for a late one (when the stream is past its first day)."""
    day_start = kafka_ts - kafka_ts % DAY_MS
    if spec.late_share and rng.random() < spec.late_share and day_start > start:
        return rng.randrange(start, day_start)
    return max(start, kafka_ts - rng.randrange(_JITTER_MS))


def _malformed(rng: random.Random, reason: Reason, event_type: EventType, ts: int,
               header: bytes, payload: bytes) -> bytes | None:
    """A record value that fails decoding with exactly ``reason``."""
    if reason is Reason.NULL_VALUE:
        return None
    if reason is Reason.EMPTY_VALUE:
        return b""
    if reason is Reason.SHORT_HEAD:
        return rng.randbytes(rng.randrange(1, frames.HEAD_SIZE))
    if reason is Reason.UNKNOWN_MARKER:
        return frames.encode(rng.choice(_UNKNOWN_MARKERS), ts, header, payload)
    if reason is Reason.BAD_HEADER:
        return frames.encode(event_type.marker, ts, _BROKEN_MESSAGE, payload)
    if reason is Reason.BAD_BODY:
        return frames.encode(event_type.marker, ts, header, _BROKEN_MESSAGE)
    good = frames.encode(event_type.marker, ts, header, payload)
    return good + b"\x00" if rng.random() < 0.5 else good[:-1]  # LENGTH_MISMATCH


class Tally:
    """Counts of produced records by kind and by partition (the produce report)."""

    def __init__(self) -> None:
        self.kinds: collections.Counter[str] = collections.Counter()
        self.partitions: collections.Counter[int] = collections.Counter()

    def add(self, record: Record) -> None:
        self.kinds[record.kind] += 1
        self.partitions[record.partition] += 1

    @property
    def total(self) -> int:
        return sum(self.kinds.values())

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: ``types`` (good records by type name), ``bad`` (by reason), totals."""
        bad = {r.value for r in BAD_KINDS}
        return {
            "total": self.total,
            "types": {k: n for k, n in sorted(self.kinds.items()) if k not in bad},
            "bad": {k: n for k, n in sorted(self.kinds.items()) if k in bad},
            "partitions": {str(p): n for p, n in sorted(self.partitions.items())},
        }
