"""``garmexport repair`` (duplicates, quarantine): files rewritten without some rows, through
compaction's crash-safe swap (I/O).

Why the swap (DESIGN.md 6): taking a row out of a file a reader sees means replacing the
file, and no store replaces many files at once. Compaction already replaces a day's files
so that a reader through the metastore sees the day before, then the day after, never a
mix, and so that a crash at any step is finished by the next run. A repair is a
compaction whose outputs are its inputs less the dropped rows: each rewritten file
becomes one compacted file (a name the exporter never uses, with its ranges sidecar) of a
new generation of its day, and the journal, view, flip, grace, sweep and roll-forward are
compaction's own, and so is the order of the run's steps: a repair is a run of
compaction's swap driver (:mod:`garmexport.compaction.swap_driver`: lease, recovery,
retired views' deletion, lease check and commit, ``_COMPLETE``, grace). So a killed repair
is finished by the next repair or by the next ``compact``, whichever runs first, and both
take the root's lease (:mod:`garmexport.compaction.lease`), so neither ever runs beside the
other.

The repair's work in the driver (:func:`run`): wait out the swaps a killed run left
(their day directories still show the rows they remove, and the plan reads the whole
output at once), then read the output and plan (:func:`read_and_plan`, the caller's),
then per (dataset or quarantine, day) write the outputs into staging and commit.

Memory: one file at a time is read whole (a compacted file is ``compaction.target_file_bytes``
at most, a raw one ``writer.max_file_rows``).
"""

from __future__ import annotations

import io
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from garmexport.compaction.fs import FileOps
from garmexport.compaction.lease import LEASE_S
from garmexport.compaction.names import CompactedName, sidecar_path, staging_path, view_path
from garmexport.compaction.plan import Range
from garmexport.compaction.recover import Clock, Locator, wall_ms
from garmexport.compaction.scan import day_generation, ranges_to_json
from garmexport.compaction.swap import Journal, Move, crash_point
from garmexport.compaction.swap_driver import DriveOptions, Swaps, drive
from garmexport.protocol.naming import FileName, day_dir
from garmexport.storage.footer import KEY_PREFIX
from garmexport.repair.rows import Key

_FOOTER_PREFIX = KEY_PREFIX.encode()
#: a kept row's new values, by column name (the quarantine's new reason, detail, origin)
Updates = Mapping[Key, Mapping[str, str]]


@dataclass(frozen=True)
class SwapOptions:
    codec: str
    lateness_s: float
    #: how long the day directory stays as it was after the flip (0: swap at once)
    grace_s: float
    sweep_every_s: float
    lease_wait_s: float
    #: how long the root's lease outlives the run's last renewal (compaction's default)
    lease_s: float = LEASE_S


@dataclass
class Rewritten:
    days: int = 0
    files_in: int = 0
    files_out: int = 0
    rows_dropped: int = 0
    rows_updated: int = 0
    #: swaps a killed run had left, finished before this run read the output
    recovered: int = 0
    #: seconds waited for the grace: of the swaps a killed run had left, then of this run's
    waited_s: float = 0.0
    max_swap_s: float = 0.0
    #: metastore views retired longer ago than the grace, deleted (as compaction does)
    views_deleted: int = 0


def _labels(name: str) -> tuple[str, str]:
    """(source, topic) of a file of ours: the feed its compacted replacement is named by."""
    parsed = FileName.parse(name) or CompactedName.parse(name)
    if parsed is None:
        raise ValueError(f"{name}: not a file repair rewrites (not named by garmexport)")
    return parsed.source, parsed.topic


def without(table: pa.Table, drops: Counter[Key], updates: Updates) -> tuple[pa.Table, int]:
    """``table`` less the rows ``drops`` counts (the first ones of each record), with the
    ``updates`` of the rows kept; how many rows were updated."""
    parts = table.column("kafka_partition").to_numpy(zero_copy_only=False)
    offs = table.column("kafka_offset").to_numpy(zero_copy_only=False)
    keep = np.ones(table.num_rows, dtype=bool)
    want = dict(drops)
    for i in np.flatnonzero(np.isin(offs, [o for _, o in want])).tolist():
        key = (int(parts[i]), int(offs[i]))
        if want.get(key, 0) > 0:
            keep[i] = False
            want[key] -= 1
    kept = table.filter(pa.array(keep))
    if not updates or not kept.num_rows:
        return kept, 0
    parts = kept.column("kafka_partition").to_numpy(zero_copy_only=False)
    offs = kept.column("kafka_offset").to_numpy(zero_copy_only=False)
    rows = [(i, updates[k]) for i, k in enumerate(zip(parts.tolist(), offs.tolist()))
            if k in updates]
    for column in sorted({c for _, new in rows for c in new}):
        values = kept.column(column).to_pylist()
        for i, new in rows:
            if column in new:
                values[i] = new[column]
        at = kept.schema.get_field_index(column)
        column_field = kept.schema.field(at)
        kept = kept.set_column(at, column_field, pa.array(values, column_field.type))
    return kept, len(rows)


def _ranges(table: pa.Table) -> tuple[Range, ...]:
    """One range per partition of the rows of ``table``: the lowest and highest offset and
    how many (the sidecar's words: what traces the file's rows back to Kafka)."""
    parts = table.column("kafka_partition").to_numpy(zero_copy_only=False)
    offs = table.column("kafka_offset").to_numpy(zero_copy_only=False)
    out = []
    for p in sorted(set(parts.tolist())):
        mine = offs[parts == p]
        out.append(Range(int(p), int(mine.min()), int(mine.max()), int(len(mine))))
    return tuple(out)


def _bare(table: pa.Table) -> pa.Table:
    """``table`` without the exporter's footer facts: a compacted file has a sidecar
    instead, and the facts of the file it replaces would no longer be true."""
    meta = {k: v for k, v in (table.schema.metadata or {}).items()
            if not k.startswith(_FOOTER_PREFIX)}
    return table.replace_schema_metadata(meta or None)


def stage_day(fs: FileOps, place: str, day: str, files: Mapping[str, Counter[Key]],
              updates: Updates, codec: str, view: bool, done: Rewritten) -> Journal:
    """Write the rewritten ``files`` of one day into staging; the journal that swaps them
    in (not written yet: :func:`commit` does, and that is the commit point)."""
    generation = day_generation(fs, place, day)
    staging = staging_path(place, day, generation)
    base = day_dir(place, day)
    moves: list[Move] = []
    deletes: list[str] = []
    for path in sorted(files):
        name = path.rpartition("/")[2]
        source, topic = _labels(name)
        table, updated = without(pq.read_table(io.BytesIO(fs.read(path))), files[path],
                                 updates)
        done.rows_updated += updated
        done.files_in += 1
        dropped = sum(files[path].values())
        done.rows_dropped += dropped
        if table.num_rows:
            out = CompactedName(source, topic, generation, len(moves))
            buf = io.BytesIO()
            pq.write_table(_bare(table), buf, compression=codec)
            staged = f"{staging}/part-{len(moves):05d}.parquet"
            fs.write(staged, buf.getvalue())
            moves.append(Move(staged, f"{base}/{out.format()}", sidecar_path(base, out),
                              ranges_to_json(_ranges(table), source=source, topic=topic,
                                             generation=generation, rows=table.num_rows,
                                             inputs=[name], repaired_rows=dropped)))
        deletes.append(path)
        compacted = CompactedName.parse(name)
        if compacted is not None:  # data file before its sidecar, as compaction deletes
            deletes.append(sidecar_path(base, compacted))
    done.files_out += len(moves)
    return Journal(place, day, generation, staging, tuple(moves), tuple(deletes),
                   view_path(place, day, generation) if view else "")


def run(fs: FileOps, locator: Locator | None, opts: SwapOptions,
        read_and_plan: Callable[[], tuple[Mapping[tuple[str, str], Mapping[str, Counter[Key]]],
                                          Updates]],
        say: Callable[[str], None], crash: Callable[[str], None] = crash_point,
        clock: Clock = wall_ms) -> Rewritten:
    """Through compaction's swap driver (:func:`garmexport.compaction.swap_driver.drive`):
    finish a killed run's swaps, then ``read_and_plan()`` (the files to rewrite per (place,
    day), and the kept rows' updates), then rewrite and swap them in, waiting out the
    grace (see the module docstring). ``say`` is told each step."""
    done = Rewritten()

    def work(swaps: Swaps) -> None:
        recovered, ctx = swaps.recovered, swaps.ctx
        done.recovered = swaps.summary.rolled_forward  # the driver's count: waiting ones too
        if recovered.rolled_forward:
            say(f"finished {recovered.rolled_forward} swaps an earlier run left")
        if ctx.waiting:  # a day of theirs still shows the rows they remove: before the read
            say(f"finishing {len(ctx.waiting)} swaps an earlier run left (their grace ends "
                f"in {max(0, max(w.due_at_ms for w in ctx.waiting) - clock()) / 1000:.0f} s)")
            swaps.wait_out()
        by_place, updates = read_and_plan()
        for (place, day), files in sorted(by_place.items()):
            started = time.monotonic()
            journal = stage_day(fs, place, day, files, updates, opts.codec,
                                locator is not None, done)
            outcome = swaps.commit(journal)
            done.days += 1
            say(f"{day_dir(place, day)}: swapped {len(files)} files for {len(journal.moves)} "
                f"(generation {journal.generation}) in {time.monotonic() - started:.1f} s"
                + ("" if outcome.due_at_ms is None else
                   f"; the day directory changes after the grace ({ctx.grace_s:.0f} s)"))
            swaps.mark(place, day)

    _, summary = drive(fs, locator, DriveOptions(opts.lateness_s, opts.grace_s,
                                                 opts.sweep_every_s, opts.lease_wait_s,
                                                 opts.lease_s), work, None, crash, clock)
    done.waited_s = summary.waited_s
    done.max_swap_s = summary.max_swap_s
    done.views_deleted = summary.views_deleted
    return done
