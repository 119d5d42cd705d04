"""Listing the output for compaction: days of an output, and a day's files as plan inputs.

A raw file's range comes from its footer's key-value metadata (``garmexport.partition``,
``garmexport.first_offset``, ``garmexport.last_offset``, ``garmexport.rows``), read with a
tail read of the footer only. A compacted file's ranges come from its sidecar. Names that
are neither (foreign files, hidden bookkeeping, quarantine-style names) are not inputs.
A raw file whose footer disagrees with its name, or a compacted file without a sidecar,
is reported in ``problems`` and left out of the plan (left alone, never deleted).

Files the Garmadon JVM exporter left in a day garmexport took over (``<p>.index=<n>``,
docs/jvm-takeover.md) are foreign names here on purpose: they are
never folded, only read by queries and ``verify``. Their footers carry no Kafka facts, their
rows no ``kafka_partition``, and folding them would rewrite (and drop the heartbeat rows
of) files that the takeover promises to leave as they were.
"""

from __future__ import annotations

import json

from garmexport.compaction.fs import FileOps
from garmexport.compaction.names import (COMPLETE, CompactedName, parse_journal, parse_work_entry,
                                         retired_dir, work_dir)
from garmexport.compaction.plan import InputFile, Range, next_generation
from garmexport.storage.footer import FileFacts, read_footer
from garmexport.protocol.naming import FileName, day_dir, parse_day_dir


def list_days(fs: FileOps, output: str) -> list[str]:
    """Days (``YYYY-MM-DD``) that have a directory under ``output``, sorted."""
    return sorted(d for d in (parse_day_dir(e.name) for e in fs.list(output) if e.is_dir)
                  if d is not None)


def list_outputs(fs: FileOps) -> list[str]:
    """Top-level directories of the root that are datasets (not bookkeeping), sorted."""
    return sorted(e.name for e in fs.list("") if e.is_dir and e.name[0] not in "_.")


def _raw_input(fs: FileOps, path: str, name: FileName, size: int) -> InputFile:
    meta = read_footer(fs, path)
    try:
        facts = FileFacts.from_metadata(meta.metadata)
    except ValueError as exc:
        raise ValueError(f"{path}: footer has {exc}") from None
    r = Range(facts.partition, facts.first_offset, facts.last_offset, facts.rows)
    if (r.partition, r.first_offset) != (name.partition, name.first_offset):
        raise ValueError(f"{path}: footer says partition {r.partition} first offset "
                         f"{r.first_offset}, the name disagrees")
    return InputFile(path.rpartition("/")[2], name.source, name.topic, size, (r,),
                     schema_key=str(meta.schema))


def ranges_to_json(ranges: tuple[Range, ...], **extra: object) -> str:
    """The sidecar document of a compacted file: its Kafka ranges (and ``extra`` facts)."""
    return json.dumps({"version": 1, **extra, "ranges": [
        {"partition": r.partition, "first_offset": r.first_offset,
         "last_offset": r.last_offset, "rows": r.rows} for r in ranges]}, indent=0)


def ranges_from_json(data: bytes) -> tuple[Range, ...]:
    doc = json.loads(data)
    return tuple(Range(int(r["partition"]), int(r["first_offset"]), int(r["last_offset"]),
                       int(r["rows"])) for r in doc["ranges"])


def scan_day(fs: FileOps, output: str, day: str) -> tuple[list[InputFile], list[str], list[str]]:
    """(inputs, every name in the day dir, problems) of one day directory."""
    base = day_dir(output, day)
    entries = [e for e in fs.list(base) if not e.is_dir]
    names = {e.name for e in entries}
    inputs: list[InputFile] = []
    problems: list[str] = []
    for e in sorted(entries, key=lambda e: e.name):
        if e.name[:1] in ("_", "."):  # hidden from readers: never data
            continue
        path = f"{base}/{e.name}"
        raw = FileName.parse(e.name)
        compacted = CompactedName.parse(e.name)
        try:
            if raw is not None and raw.origin is None:
                inputs.append(_raw_input(fs, path, raw, e.size))
            elif compacted is not None:
                if compacted.sidecar() not in names:
                    raise ValueError(f"{path}: no ranges sidecar")
                ranges = ranges_from_json(fs.read(f"{base}/{compacted.sidecar()}"))
                inputs.append(InputFile(e.name, compacted.source, compacted.topic, e.size,
                                        ranges, compacted=True, schema_key="c:" + e.name))
        except (ValueError, KeyError, OSError) as exc:
            problems.append(str(exc))
    return inputs, sorted(names - {COMPLETE}), problems


def day_generation(fs: FileOps, output: str, day: str) -> int:
    """The generation a new swap of (output, day) takes, compaction's or a repair's
    (:func:`.plan.next_generation`): above every one its day directory (files and views),
    its work entries and its views' retirement records show."""
    names = [e.name for e in fs.list(day_dir(output, day))]
    work = [g for e in fs.list(work_dir(output, day))
            if (g := parse_work_entry(e.name)) is not None]
    retired = [g for e in fs.list(retired_dir(output, day))
               if (g := parse_journal(e.name)) is not None]
    return next_generation(names, work + retired)
