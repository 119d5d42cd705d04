"""Output names: the file name is the commit record.

Layout under the output root (``/``-separated paths relative to it)::

    <output>/day=YYYY-MM-DD/<source>+<topic>+<PPPPP>+<O*20>.parquet             data
    _quarantine/day=YYYY-MM-DD/<source>+<topic>+<PPPPP>+<O*20>+<origin>.parquet  bad records
    _offsets/<source>+<topic>/<PPPPP>/m+<instance>+<counter>.json               markers
    _offsets/<source>+<topic>/<PPPPP>/i+<origin>+<kind>+<day>+<O*20>             intents
    _offsets/<source>+<topic>/<PPPPP>/j+takeover.json                           JVM takeover
    _tmp/<instance>/...                                                         temp files

Invariants:

- A data or quarantine name holds only what two owners starting from the same committed
  state agree on (source, topic, partition, first offset, origin), so an exclusive publish
  of the same name fences one of them.
- Offsets are zero-padded to 20 digits and partitions to 5, so name order is offset order.
- ``+`` never occurs in a Kafka topic name (legal characters are ``[a-zA-Z0-9._-]``) nor in
  our labels, so parsing is unambiguous. Parsers are total: a foreign name gives ``None``;
  a name parses only if formatting the result gives it back (ASCII digits, no trailing
  newline).
- Every bookkeeping name starts with ``_`` so Spark and Hive see data files only.

A *chain* is the sequence of files of one (origin, kind, day) in one partition, where the
origin is the writer that produced them (an output name, or ``_frame`` for records that
could not even be routed) and the kind is ``d`` (data) or ``q`` (quarantine). Within a
chain, files cover consecutive stretches of that chain's sub-stream in offset order.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

OFFSETS_DIR = "_offsets"
QUARANTINE_DIR = "_quarantine"
TMP_DIR = "_tmp"
FRAME_ORIGIN = "_frame"
DATA = "d"
QUARANTINE = "q"
KINDS = (DATA, QUARANTINE)

#: The one pattern of a label in a name (source, topic, origin, instance): never ``+``.
LABEL_PATTERN = r"[A-Za-z0-9._-]+"
_LABEL = LABEL_PATTERN
_DATA_RE = re.compile(rf"^({_LABEL})\+({_LABEL})\+(\d{{5}})\+(\d{{20}})(?:\+({_LABEL}))?\.parquet$", re.ASCII)
_MARKER_RE = re.compile(rf"^m\+({_LABEL})\+(\d{{12}})\.json$", re.ASCII)
_INTENT_RE = re.compile(rf"^i\+({_LABEL})\+([dq])\+(\d{{4}}-\d{{2}}-\d{{2}})\+(\d{{20}})$", re.ASCII)
_LABEL_RE = re.compile(rf"^{_LABEL}$", re.ASCII)
_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_DAY_PREFIX = "day="
_EPOCH = _dt.date(1970, 1, 1)
MS_PER_DAY = 86_400_000
#: What garmexport saw of a JVM exporter's files when it took a partition over
#: (``protocol.jvm_resume.Takeover``), kept to notice a JVM exporter still writing.
TAKEOVER_FILE = "j+takeover.json"


def check_label(value: str, what: str) -> str:
    """Return ``value`` if it may appear in a name; raise ValueError naming ``what``."""
    if not _LABEL_RE.fullmatch(value):
        raise ValueError(f"{what} {value!r} may only hold letters, digits, '.', '_' and '-'")
    return value


def day_name(day_number: int) -> str:
    """``YYYY-MM-DD`` of a day counted from 1970-01-01 (UTC)."""
    return (_EPOCH + _dt.timedelta(days=day_number)).isoformat()


def day_number(day: str) -> int:
    """Inverse of :func:`day_name`; raises ValueError on a malformed day."""
    return (_dt.date.fromisoformat(day) - _EPOCH).days


def quarantine_day(kafka_ms: int) -> int:
    """The UTC day a quarantined record is filed under: its Kafka timestamp's, day 0 for a
    record without one (Kafka's -1). The one rule for the router's and the writers' quarantine."""
    return max(kafka_ms, 0) // MS_PER_DAY


def day_number_of_ms(timestamp_ms: int) -> int:
    """UTC day of an epoch-milliseconds timestamp (floor division: negative stays exact); the
    one day rule of an event (the router also applies it element-wise to an int64 array)."""
    return timestamp_ms // MS_PER_DAY


@dataclass(frozen=True, order=True)
class FileName:
    """The name of one published data or quarantine file.

    ``origin`` is set for quarantine files only: the writer whose chain the file belongs to.
    """

    source: str
    topic: str
    partition: int
    first_offset: int
    origin: str | None = None

    def format(self) -> str:
        base = f"{self.source}+{self.topic}+{self.partition:05d}+{self.first_offset:020d}"
        return f"{base}+{self.origin}.parquet" if self.origin is not None else f"{base}.parquet"

    @staticmethod
    def parse(name: str) -> FileName | None:
        """The FileName of ``name``, or None for anything that is not ours."""
        m = _DATA_RE.fullmatch(name)
        if not m:
            return None
        return FileName(m[1], m[2], int(m[3]), int(m[4]), m[5])


def day_dir(place: str, day: str) -> str:
    """The directory of ``day`` (``YYYY-MM-DD``) under ``place`` (a dataset, the quarantine,
    a compaction work directory): the one place that builds ``day=`` paths."""
    return f"{place}/{_DAY_PREFIX}{day}"


def data_path(output: str, day: str, name: FileName) -> str:
    return f"{day_dir(output, day)}/{name.format()}"


def quarantine_path(day: str, name: FileName) -> str:
    return f"{day_dir(QUARANTINE_DIR, day)}/{name.format()}"


def chain_path(origin: str, kind: str, day: str, name: FileName) -> str:
    """Path of a file of chain (origin, kind, day); ``name.origin`` must match the kind."""
    return data_path(origin, day, name) if kind == DATA else quarantine_path(day, name)


def partition_dir(source: str, topic: str, partition: int) -> str:
    """Directory holding the markers and intents of one Kafka partition."""
    return f"{OFFSETS_DIR}/{source}+{topic}/{partition:05d}"


def intent_path(source: str, topic: str, partition: int, intent: IntentName) -> str:
    """Path of an intent of one Kafka partition (in :func:`partition_dir`)."""
    return f"{partition_dir(source, topic, partition)}/{intent.format()}"


@dataclass(frozen=True, order=True)
class MarkerName:
    instance: str
    counter: int

    def format(self) -> str:
        return f"m+{self.instance}+{self.counter:012d}.json"

    @staticmethod
    def parse(name: str) -> MarkerName | None:
        m = _MARKER_RE.fullmatch(name)
        return MarkerName(m[1], int(m[2])) if m else None


@dataclass(frozen=True, order=True)
class IntentName:
    """Announces, before a publish, the file a chain is about to gain."""

    origin: str
    kind: str
    day: str
    first_offset: int

    def format(self) -> str:
        return f"i+{self.origin}+{self.kind}+{self.day}+{self.first_offset:020d}"

    @staticmethod
    def parse(name: str) -> IntentName | None:
        m = _INTENT_RE.fullmatch(name)
        return IntentName(m[1], m[2], m[3], int(m[4])) if m else None


def parse_day_dir(name: str) -> str | None:
    """``2026-11-01`` for ``day=2026-11-01`` (the last part of :func:`day_dir`); None for
    anything else: the one place that parses ``day=`` names."""
    return parse_day(name[len(_DAY_PREFIX):]) if name.startswith(_DAY_PREFIX) else None


def parse_day(day: str) -> str | None:
    """``day`` if it is a real date written ``YYYY-MM-DD``; None for anything else."""
    if not _DAY_RE.fullmatch(day):  # fromisoformat also takes week dates and more
        return None
    try:
        _dt.date.fromisoformat(day)
    except ValueError:
        return None
    return day if len(day) == 10 else None
