"""One compaction run over an output root: recover, plan, write, swap, mark, sync Hive.

Order, and why (steps 0, 1 and 5 are the swap driver's, :mod:`.swap_driver`, which a
repair runs too; steps 2-4 are compaction's work in it):

0. Take the root's lease (:mod:`.lease`), waiting for a run that holds it: one run at a
   time, and a killed run's lease expires within seconds for its retry.
1. :func:`.recover.recover_all` first: finish or undo any swap a crashed run left, so the
   day directories hold each row exactly once before anything is planned; then delete
   the metastore views retired longer ago than the grace (:mod:`.retired`).
2. Markers give W and the closed horizon (:mod:`.markers`, :mod:`.closed`); one read
   for the whole run: markers only grow, so a stale read only folds less.
3. Per output, per closed day: scan, plan (pure), write with Spark into staging, commit the
   swap (:mod:`.swap`: with a metastore view when Hive is on, filled here, the partition
   left on the day directory), then write ``_COMPLETE`` when the day is fully compacted
   and its visible files are the ones it names. A day whose swap waits (below) is
   neither compacted again nor marked.
4. Per output, and for ``_quarantine``: the Hive table gets new columns and the new day
   partitions (tables as :mod:`garmexport.hive.tables` defines them).
5. Flip every waiting swap to its view, and wait out its grace (``grace_s`` since its
   flip, so that a query planned on the day directory before the flip still finds its
   files), sweeping the exporter's new files into the views every ``sweep_every_s``; then
   finish each swap and write its day's ``_COMPLETE``. The flips are made here, not in
   steps 1 and 3, so that no view is read through the metastore while nothing sweeps it
   (the other days' compaction can take hours). With a grace of 0 there is nothing to
   wait for: every swap ended in step 3.

A dry run (``opts.dry_run``) makes steps 2 and 3's plans only: no lease, no recovery, no
write (:func:`run`).

Every step can be repeated after a crash: a rerun recovers, re-plans from what is on disk,
and the DDL is IF NOT EXISTS.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from garmexport.compaction import hive
from garmexport.compaction.closed import last_closed_day
from garmexport.compaction.fs import FileOps
from garmexport.compaction.markers import read_markers
from garmexport.compaction.lease import LEASE_S
from garmexport.compaction.names import (COMPACTION_DIR, CompactedName, sidecar_path, staging_path,
                                         view_path, work_dir)
from garmexport.compaction.plan import DayPlan, plan_day
from garmexport.compaction.rewrite import day_closed
from garmexport.compaction.recover import Clock, Locator, wall_ms
from garmexport.compaction.run_state import Summary
from garmexport.compaction.scan import (day_generation, list_days, list_outputs, ranges_to_json,
                                        scan_day)
from garmexport.compaction.spark_job import write_outputs
from garmexport.compaction.swap import Journal, Move, crash_point
from garmexport.compaction.swap_driver import DriveOptions, Swaps, drive
from garmexport.storage.footer import read_footer
from garmexport.hive.tables import TableNaming, columns_of, dataset_schema, table_location
from garmexport.observe.logs import log_event
from garmexport.protocol.naming import QUARANTINE_DIR, day_dir, day_name, parse_day_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactOptions:
    root_uri: str
    lateness_s: float
    target_file_bytes: int
    sort_columns: tuple[str, ...]
    codec: str
    hive: bool = True
    tables: TableNaming = TableNaming()
    outputs: tuple[str, ...] = ()  # empty: every dataset under the root
    days: tuple[str, ...] = ()  # empty: every closed day
    dry_run: bool = False
    #: the files a metastore query may have listed are kept this long after the metastore
    #: left them: the day directory's old files after the flip to the view, a retired view
    #: after the flip back
    grace_s: float = 3600.0
    #: while a swap waits out its grace, the exporter's new files of its day are copied
    #: into its view this often (a quarter of ``hive.register_delay_s`` in the CLI)
    sweep_every_s: float = 5.0
    #: how long a run waits for another run of the same root to finish
    lease_wait_s: float = 3 * 3600.0
    #: how long the root's lease outlives this run's last renewal (:mod:`.lease`): how long
    #: a retry waits after a kill; renewed every quarter of it (at most every RENEW_S)
    lease_s: float = LEASE_S


def journal_for(plan: DayPlan, staged: list[str], view: bool = False) -> Journal:
    """The journal of a written plan: staged part k -> output k, inputs to delete, and the
    metastore view of the generation when ``view``."""
    base = day_dir(plan.output, plan.day)
    moves = tuple(Move(staged[k], f"{base}/{o.name.format()}", sidecar_path(base, o.name),
                       ranges_to_json(o.ranges(), source=o.name.source, topic=o.name.topic,
                                      generation=plan.generation, rows=o.rows,
                                      inputs=[f.name for f in o.inputs]))
                  for k, o in enumerate(plan.outputs))
    deletes: list[str] = []
    for f in plan.inputs:
        deletes.append(f"{base}/{f.name}")
        if f.compacted:  # data file before its sidecar: data never exists without ranges
            deletes.append(sidecar_path(base, CompactedName.parse(f.name)))  # type: ignore[arg-type]
    return Journal(plan.output, plan.day, plan.generation,
                   staging_path(plan.output, plan.day, plan.generation), moves, tuple(deletes),
                   view_path(plan.output, plan.day, plan.generation) if view else "")


def _count(summary: Summary, plan: DayPlan, bytes_out: int) -> int:
    """Add one compacted (or, in a dry run, planned) day to ``summary``; its input bytes."""
    bytes_in = sum(f.size for f in plan.inputs)
    summary.days_compacted += 1
    summary.files_in += len(plan.inputs)
    summary.files_out += len(plan.outputs)
    summary.bytes_in += bytes_in
    summary.bytes_out += bytes_out
    summary.rows += sum(o.rows for o in plan.outputs)
    return bytes_in


def compact_day(spark: Any, fs: FileOps, opts: CompactOptions, output: str, day: str,
                watermarks: dict[tuple[str, str, int], int], summary: Summary,
                swaps: Swaps | None) -> list[str]:
    """Compact one closed day through ``swaps`` (None: a dry run, which only plans);
    returns the paths of the files it published (maybe none)."""
    files, _, problems = scan_day(fs, output, day)
    summary.problems.extend(problems)
    plan = plan_day(output, day, files, watermarks, day_generation(fs, output, day),
                    opts.target_file_bytes)
    summary.files_left += len(plan.left)
    if not plan.outputs or swaps is None:
        log_event(log, "compaction_day_planned", output=output, day=day,
                  outputs=len(plan.outputs), inputs=len(plan.inputs), left=len(plan.left))
        if plan.outputs:  # a dry run counts what it would compact
            _count(summary, plan, bytes_out=0)
        return []
    started = time.monotonic()
    staging = staging_path(output, day, plan.generation)
    staged, _, bytes_out = write_outputs(spark, fs, plan, staging, opts.codec,
                                         opts.sort_columns)
    journal = journal_for(plan, staged, view=swaps.ctx.locator is not None)
    outcome = swaps.commit(journal)
    swap_s = outcome.window_s
    bytes_in = _count(summary, plan, bytes_out)
    log_event(log, "compaction_day_done", output=output, day=day, generation=plan.generation,
              files_in=len(plan.inputs), files_out=len(plan.outputs), bytes_in=bytes_in,
              bytes_out=bytes_out, left=len(plan.left), swap_s=round(swap_s, 3),
              seconds=round(time.monotonic() - started, 2),
              waits_s=None if outcome.due_at_ms is None else round(swaps.ctx.grace_s, 1))
    if outcome.due_at_ms is None:
        return [m.final for m in journal.moves]
    return [journal.in_view(m) for m in journal.moves]


def sync_hive(spark: Any, fs: FileOps, opts: CompactOptions, output: str, days: list[str],
              written: list[str]) -> None:
    """Table columns from the footers of the files written now and of the newest day (the
    quarantine's from its fixed schema); every day a partition."""
    if output == QUARANTINE_DIR:
        schemas = [dataset_schema(output)]
    else:
        newest, _, _ = scan_day(fs, output, days[-1])
        samples = {f.schema_key or f.name: f"{day_dir(output, days[-1])}/{f.name}"
                   for f in newest}
        schemas = [read_footer(fs, p).schema.to_arrow_schema()
                   for p in list(written) + list(samples.values())]
    if not schemas:
        log_event(log, "hive_table_skipped", output=output, reason="no data file to read")
        return
    t = opts.tables
    stats = hive.sync_table(spark, t.database, t.table(output), table_location(fs.uri, output),
                            columns_of(schemas), days)
    log_event(log, "hive_table_synced", table=f"{t.database}.{t.table(output)}", **stats)


def locator_of(spark: Any, fs: FileOps, opts: CompactOptions) -> Locator | None:
    """The metastore flips of this run's swaps; None when Hive is off (plain swaps)."""
    if not opts.hive or opts.dry_run:
        return None
    t = opts.tables

    def locate(output: str, day: str, path: str) -> None:
        hive.locate(spark, t.database, t.table(output), day, f"{fs.uri}/{path}")
    return locate


def run(spark: Any, fs: FileOps, opts: CompactOptions, now_ms: int,
        crash: Callable[[str], None] = crash_point, clock: Clock = wall_ms) -> Summary:
    """Run compaction once over the root (see the module docstring).

    A dry run only reads: it takes no lease (so it neither waits for a running compaction
    nor writes under ``_compaction/_lease/``), recovers and deletes nothing, and does not
    plan a day whose swap is under way or was left by a killed run (counted in
    ``swaps_pending``): recovery would change that day before any plan.
    """
    started = time.monotonic()
    if opts.dry_run:
        summary = Summary()
        held = swapping(fs)
        summary.swaps_pending = len(held)
        _compact_days(spark, fs, opts, now_ms, summary, held, None)
    else:
        drive_opts = DriveOptions(opts.lateness_s, opts.grace_s, opts.sweep_every_s,
                                  opts.lease_wait_s, opts.lease_s)
        _, summary = drive(fs, locator_of(spark, fs, opts), drive_opts, lambda swaps:
                           _compact_days(spark, fs, opts, now_ms, swaps.summary,
                                         swaps.held, swaps), now_ms, crash, clock)
    summary.seconds = time.monotonic() - started
    # the same names as the summary printed and as JSON: a dry run's are planned figures
    done = {k: v for k, v in summary.as_dict(opts.dry_run).items() if k != "problems"}
    log_event(log, "compaction_done", dry_run=opts.dry_run, **done,
              problems=len(summary.problems))
    return summary


def swapping(fs: FileOps) -> set[tuple[str, str]]:
    """(output, day) of every day with a swap's journal, staging dir or flip record under
    ``_compaction/``: a running compaction's or repair's swap, or one a killed run left
    (read only, for a dry run, which holds no lease and recovers nothing)."""
    found = set()
    for out in fs.list(COMPACTION_DIR):  # _lease and _retired hold no day directory
        for d in fs.list(f"{COMPACTION_DIR}/{out.name}"):
            day = parse_day_dir(d.name)
            if day is not None and fs.list(work_dir(out.name, day)):
                found.add((out.name, day))
    return found


def _compact_days(spark: Any, fs: FileOps, opts: CompactOptions, now_ms: int,
                  summary: Summary, held: set[tuple[str, str]], swaps: Swaps | None) -> None:
    """Steps 2-4 of the module docstring (step 3 of the swap driver's, :mod:`.swap_driver`):
    per output, per closed day not ``held``, compact and mark it; then the Hive tables."""
    facts = read_markers(fs)
    last_closed = last_closed_day(facts.progress.values(), now_ms, opts.lateness_s)
    log_event(log, "compaction_start", root=opts.root_uri, partitions=len(facts.progress),
              last_closed_day=None if last_closed is None else day_name(last_closed))
    for output in opts.outputs or tuple(list_outputs(fs)):
        days = list_days(fs, output)
        written: list[str] = []
        for day in days:
            # an open day's raw files may not be rewritten (.rewrite), and its compacted
            # files only go with raw ones (.plan): nothing to plan there
            if (opts.days and day not in opts.days) or not day_closed(day, last_closed):
                continue
            if (output, day) in held:  # its swap waits out the grace (step 5), or is
                continue  # under way or unrecovered (a dry run)
            written += compact_day(spark, fs, opts, output, day, facts.watermarks(output),
                                   summary, swaps)
            if swaps is not None:
                swaps.mark(output, day)
        if opts.hive and days and swaps is not None:
            sync_hive(spark, fs, opts, output, days, written)
    quarantine_days = list_days(fs, QUARANTINE_DIR)
    if opts.hive and quarantine_days and swaps is not None and not opts.outputs:
        sync_hive(spark, fs, opts, QUARANTINE_DIR, quarantine_days, [])
