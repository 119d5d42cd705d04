"""Names of what compaction writes: compacted files, their range sidecars, journals.

Layout (``/``-separated paths relative to the output root)::

    <output>/day=D/<source>+<topic>+c<GGGGGG>+<KKKKK>.parquet    compacted data (visible)
    <output>/day=D/_<source>+<topic>+c<GGGGGG>+<KKKKK>.json      its Kafka ranges (hidden)
    <output>/day=D/_COMPLETE                                    completeness marker (hidden)
    _compaction/<output>/day=D/g<GGGGGG>/                       Spark staging dir of a generation
    _compaction/<output>/day=D/g<GGGGGG>.json                   journal: the swap is committed
    <output>/day=D/_g<GGGGGG>/                                  metastore view of generation G
    _compaction/_retired/<output>/day=D/g<GGGGGG>.json          a view retired at (ms): swept later
    _compaction/_lease/<KKKKKKKKKK>.json                        who may compact the root now

Invariants:

- A compacted name never parses as an exporter name (:meth:`garmexport.protocol.naming.FileName.parse`
  gives None: the third field is ``c`` + 6 digits, never 5 digits), so the exporter and its
  fencing never mistake one for a raw file, and a raw name never parses as compacted.
- The generation G only grows per (output, day), so a new generation never reuses a name,
  nor a view kept for its grace (:func:`.scan.day_generation`, compaction's and repair's).
- Names starting with ``_`` or ``.`` are hidden from readers, so they are never data here.
- Every bookkeeping name starts with ``_``: readers of ``<output>`` see data only. A view
  directory ``_gG`` is hidden too: path readers of the day, the exporter and ``verify``
  never look into it; only the metastore points at it (:mod:`.swap`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from garmexport.protocol.naming import LABEL_PATTERN, check_label, day_dir

COMPACTION_DIR = "_compaction"
RETIRED_DIR = f"{COMPACTION_DIR}/_retired"
LEASE_DIR = f"{COMPACTION_DIR}/_lease"
COMPLETE = "_COMPLETE"
_LABEL = LABEL_PATTERN
_COMPACTED_RE = re.compile(rf"^({_LABEL})\+({_LABEL})\+c(\d{{6}})\+(\d{{5}})\.parquet$", re.ASCII)
_JOURNAL_RE = re.compile(r"^g(\d{6})\.json$", re.ASCII)
_STAGING_RE = re.compile(r"^g(\d{6})$", re.ASCII)
_FLIP_RE = re.compile(r"^g(\d{6})\.flip$", re.ASCII)
_VIEW_RE = re.compile(r"^_g(\d{6})$", re.ASCII)


@dataclass(frozen=True, order=True)
class CompactedName:
    """One compacted file of a day: the feed (source, topic) it holds, generation, index."""

    source: str
    topic: str
    generation: int
    index: int

    def __post_init__(self) -> None:
        check_label(self.source, "source")
        check_label(self.topic, "topic")
        if not (0 <= self.generation < 10**6 and 0 <= self.index < 10**5):
            raise ValueError(f"generation {self.generation} or index {self.index} out of range")

    def format(self) -> str:
        return f"{self.source}+{self.topic}+c{self.generation:06d}+{self.index:05d}.parquet"

    def sidecar(self) -> str:
        """Name of the hidden JSON file beside it holding its Kafka offset ranges."""
        return "_" + self.format()[: -len(".parquet")] + ".json"

    @staticmethod
    def parse(name: str) -> CompactedName | None:
        """The CompactedName of ``name``; None for anything else, hidden names included."""
        m = _COMPACTED_RE.fullmatch(name) if name[:1] not in ("_", ".") else None
        return CompactedName(m[1], m[2], int(m[3]), int(m[4])) if m else None


def sidecar_path(day_base: str, name: CompactedName) -> str:
    """Path of the ranges sidecar of ``name`` in day directory ``day_base``."""
    return f"{day_base}/{name.sidecar()}"


def work_dir(output: str, day: str) -> str:
    """Directory of the journals and staging dirs of one (output, day)."""
    return f"{COMPACTION_DIR}/{day_dir(output, day)}"


def journal_path(output: str, day: str, generation: int) -> str:
    return f"{work_dir(output, day)}/g{generation:06d}.json"


def staging_path(output: str, day: str, generation: int) -> str:
    return f"{work_dir(output, day)}/g{generation:06d}"


def flip_path(output: str, day: str, generation: int) -> str:
    """Record of the wall time a generation's partition was flipped to its view."""
    return f"{work_dir(output, day)}/g{generation:06d}.flip"


def view_path(output: str, day: str, generation: int) -> str:
    """The metastore view of one generation: a hidden directory of the day holding the day's
    data files as they are once the generation is swapped in (:mod:`.swap`)."""
    return f"{day_dir(output, day)}/_g{generation:06d}"


def parse_view(name: str) -> int | None:
    """Generation of a view directory name (the last part of :func:`view_path`), or None."""
    m = _VIEW_RE.fullmatch(name)
    return int(m[1]) if m else None


def retired_dir(output: str, day: str) -> str:
    """Directory of the retirement records of one (output, day)'s views."""
    return f"{RETIRED_DIR}/{day_dir(output, day)}"


def retired_path(output: str, day: str, generation: int) -> str:
    """Record of the retirement of a view (written once the metastore left it)."""
    return f"{retired_dir(output, day)}/g{generation:06d}.json"


def is_hidden(name: str) -> bool:
    """Names Spark, Hive and pyarrow skip when they list a directory."""
    return name[:1] in ("_", ".")


def parse_journal(name: str) -> int | None:
    """Generation of a journal file name, or None."""
    m = _JOURNAL_RE.fullmatch(name)
    return int(m[1]) if m else None


def parse_staging(name: str) -> int | None:
    """Generation of a staging directory name, or None."""
    m = _STAGING_RE.fullmatch(name)
    return int(m[1]) if m else None


def parse_work_entry(name: str) -> int | None:
    """Generation of a journal, staging directory or flip record name, or None."""
    m = (_JOURNAL_RE.fullmatch(name) or _STAGING_RE.fullmatch(name)
         or _FLIP_RE.fullmatch(name))
    return int(m[1]) if m else None
