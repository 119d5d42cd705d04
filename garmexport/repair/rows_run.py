"""``garmexport repair duplicates`` and ``garmexport repair quarantine``: the order of their
steps, their planning and what they print (the CLI parses the arguments and calls
:func:`run`).

- duplicates: every record held by more than one row keeps one
  (:mod:`garmexport.repair.rows` chooses which, and which files may be rewritten);
- quarantine: every quarantined record of the chosen days is decoded again with today's
  code and settings; one that decodes now, at or below its type's committed point and held
  by no dataset row, is published into its dataset by the exporter's writer (as gaps
  are: :mod:`garmexport.repair.apply`), then the quarantine's copy of every record a
  dataset holds is taken out; a record that still fails stays, with its new reason when
  it changed.

Both run under the root's compaction lease (:mod:`garmexport.repair.swap`): a killed
run's swap is finished first, then the output is read and planned, then each (dataset or
quarantine, day) is swapped. No broker is needed. A dry run (the default) reads and plans
without the lease and changes nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from garmexport.protocol.naming import day_dir, parse_day_dir
from garmexport.repair.progress import Tick
from garmexport.settings.config import Config

if TYPE_CHECKING:
    from garmexport.repair.quarantine import Replay
    from garmexport.repair.rows import RowPlan

_SHOWN = 10


@dataclass
class Planned:
    """One plan: the rows to take out (a ``repair_rows.RowPlan``), the kept rows' updates,
    the files that could not be read, and the quarantine's replay (quarantine mode)."""

    rows: RowPlan
    updates: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    replay: Replay | None = None


def run(config: Config, storage, mode: str, applying: bool,  # noqa: ANN001 - Storage
        days: tuple[str, ...], grace_s: float | None, lease_wait_s: float,
        sweep_every_s: float, tick: Tick) -> int:
    """Repair ``mode`` (duplicates or quarantine) over ``days`` (empty: every day): plan,
    and with ``applying`` swap the rewritten files in; print the plan and the summary
    line; the exit status (0 when nothing the mode fixes is left, else 1).

    ``grace_s`` None: ``compaction.retired_grace_s``."""
    from garmexport.compaction.before_spark import plain_fs, thrift_locator
    from garmexport.errors import MetastoreError
    from garmexport.hive.metastore import Metastore
    from garmexport.hive.tables import TableNaming
    from garmexport.storage.hadoop_uri import spark_root
    from garmexport.storage.options import from_output
    from garmexport.repair.swap import SwapOptions, run as swap_run

    c = config.compaction
    grace_s = c.retired_grace_s if grace_s is None else grace_s
    opts = SwapOptions(c.codec, c.lateness_s, grace_s, sweep_every_s, lease_wait_s)
    planner = Planner(mode, applying, days, config, storage, tick)
    if not applying:
        return planner.report(planner.plan(), applied=None)
    fs = plain_fs(spark_root(config.output.root, c.hadoop_root), config.output.root,
                  from_output(config.output))
    ms = Metastore(config.hive.metastore_uri, config.hive.timeout_s) \
        if config.hive.metastore_uri else None
    try:
        if ms is not None:
            try:
                ms.reach()  # before anything changes: a swap needs its flips
            except MetastoreError as exc:
                raise MetastoreError(f"{exc}; repair changed nothing: start the metastore "
                                     "(hive.metastore_uri), then run it again") from None
        locator = thrift_locator(ms, fs, TableNaming.of(config.hive)) if ms else None
        try:
            done = swap_run(fs, locator, opts, planner.plan_for_swap,
                       lambda line: print(line, flush=True))
        except MetastoreError as exc:
            raise MetastoreError(f"{exc}; a swap may be committed: the next 'garmexport "
                                 "repair' or 'garmexport compact' finishes it") from None
    finally:
        if ms is not None:
            ms.close()
        close = getattr(fs, "close", None)
        if close is not None:
            close()
    assert planner.last is not None  # run() asked for the plan
    return planner.report(planner.last, applied=done)


class Planner:
    """Reads the output and plans; remembers the last plan for the summary."""

    def __init__(self, mode: str, applying: bool, days: tuple[str, ...], config: Config,
                 storage, tick: Tick) -> None:  # noqa: ANN001 - Storage
        self.mode, self.applying = mode, applying
        self.config, self.storage, self.tick = config, storage, tick
        self.days = set(days)
        self.last: Planned | None = None
        self.filled = 0
        #: the --day values no file of the output is of
        self.absent: list[str] = []

    def _read(self) -> tuple[dict, list]:
        from garmexport.verify.root_read import read_root

        root = read_root(self.storage, self.config.source.topic, self.config.jvm.cluster,
                         self.config.output.root, self.tick)
        return root.held, root.unreadable

    def _verdicts(self, held: Mapping, datasets: bool) -> Callable:
        from garmexport.compaction.closed import last_closed_day
        from garmexport.compaction.markers import read_markers
        from garmexport.compaction.rewrite import day_closed
        from garmexport.compaction.store_fs import StoreFs
        from garmexport.repair.rows import verdict

        facts = read_markers(StoreFs(self.storage, self.storage.uri))
        last_closed = last_closed_day(facts.progress.values(), int(time.time() * 1000),
                                      self.config.compaction.lateness_s)
        last: dict[str, int] = {}
        for (_, o), paths in held.items():
            for path in paths:
                if o > last.get(path, -1):
                    last[path] = o

        def can(path: str):  # noqa: ANN202 - Rewritable
            return verdict(path, last.get(path, -1), facts.low,
                           lambda day: day_closed(day, last_closed), datasets)
        return can

    def plan(self) -> Planned:
        """The plan, from a fresh read of the output."""
        from garmexport.repair.rows import plan, quarantine_copies

        held, unreadable = self._read()
        replay = None
        quarantine = self.mode == "quarantine"
        # what the replay publishes is in datasets, which its verdicts never allow: one
        # set of verdicts serves before and after the publish
        can = self._verdicts(held, datasets=not quarantine)
        if quarantine:
            replay = self._replay(held, can)
            if replay.fills and self.applying and not unreadable:
                self._publish(replay.fills)
                held, unreadable = self._read()  # the published rows: the quarantine's
                # copies of them are duplicates now
        days = self.days

        def wanted(key, copies) -> bool:  # noqa: ANN001
            if days and not any(parse_day_dir(c.split("/")[1]) in days for c in copies):
                return False
            return not quarantine or quarantine_copies(key, copies)

        rows = plan(held, can, wanted)
        problems = [u.describe() for u in unreadable]
        if days:  # a day asked for that no file is of: a typo, or a day already gone
            seen = {parse_day_dir(p.split("/")[1]) for paths in held.values() for p in paths}
            self.absent = sorted(days - seen)
        self.last = Planned(rows, replay.updates if replay is not None else {}, problems,
                            replay)
        return self.last

    def plan_for_swap(self) -> tuple[dict, dict]:
        """:meth:`plan`, as :func:`garmexport.repair.swap.run` asks for it: the files
        to rewrite per (place, day) and the updates; nothing when a file cannot be read."""
        planned = self.plan()
        rows, updates, replay = planned.rows, planned.updates, planned.replay
        if planned.problems:
            return {}, {}
        by_place = {k: dict(v) for k, v in rows.by_place().items()}
        for path in (replay.update_files if replay is not None else ()):
            place, directory, _ = path.split("/", 2)
            by_place.setdefault((place, parse_day_dir(directory)), {}).setdefault(path, Counter())
        return by_place, updates

    def _replay(self, held: Mapping, can: Callable) -> Replay:
        from garmexport.repair.quarantine import replay_plan
        return replay_plan(self.storage, self.config, held, self.days, can, self.tick)

    def _publish(self, fills: list) -> None:
        from garmexport.repair.apply import apply
        done = apply(self.config, self.storage, fills, lambda f, p: print(
            f"published {p.path}: {p.rows} rows, offsets {p.first_offset}..{p.last_offset}",
            flush=True))
        self.filled = sum(p.rows for _, p in done.published)
        for fill, path in done.conflicts:
            print(f"conflict: {path} was published by another writer first (another "
                  f"repair?); partition {fill.partition} {fill.origin}")

    def report(self, planned: Planned, applied) -> int:  # noqa: ANN001 - Rewritten | None
        """Print the plan (or what was done) and the summary line; the exit status."""
        rows, replay, problems = planned.rows, planned.replay, planned.problems
        for day in self.absent:
            print(f"--day {day}: no file of the output is of this day")
        verb = "would take out" if applied is None else "took out"
        for (place, day), files in rows.by_place().items():
            n = sum(sum(c.values()) for c in files.values())
            names = ", ".join(p.rpartition("/")[2] for p in list(files)[:_SHOWN])
            print(f"{day_dir(place, day)}: {verb} {n} rows from {len(files)} files ({names}"
                  f"{' ...' if len(files) > _SHOWN else ''})")
        for left in rows.left[:_SHOWN]:
            print(f"left twice: partition {left.partition} offset {left.offset}: "
                  + "; ".join(f"{p} ({why})" for p, why in left.files))
        if len(rows.left) > _SHOWN:
            print(f"left twice: {len(rows.left) - _SHOWN} more records")
        if replay is not None:
            add = "would add" if applied is None else "added"
            for (place, day), found in replay.by_place().items():
                print(f"{day_dir(place, day)}: {add} {sum(s.count for s in found)} rows from the "
                      "quarantine: " + "; ".join(s.describe() for s in found[:_SHOWN])
                      + (" ..." if len(found) > _SHOWN else ""))
            print(replay.describe(applied is not None, self.filled))
        for line in problems[:_SHOWN]:
            print(f"unreadable file {line}")
        if problems and self.applying:
            print("not applied: a file that cannot be read may hold rows no listing can "
                  "see: fix it, then run repair again")
        mode = self.mode
        stuck = (replay.in_flight + sum(replay.waiting.values())) if replay is not None else 0
        if applied is None:
            todo = rows.rows + (replay.rows if replay is not None else 0)
            print(f"repair {mode}: dry run: would take out {rows.rows} rows"
                  + (f", move {replay.rows} rows out of the quarantine" if replay else "")
                  + f"; {len(rows.left)} records left twice"
                  + (f"; {stuck} quarantined records left for a later run" if replay else "")
                  + f"; {len(problems)} problems" + (" (run with --apply)" if todo else "")
                  + f"; took {self.tick.elapsed():.1f} s")
            return 0 if not todo and not rows.left and not problems and not stuck else 1
        left = len(rows.left)
        print(f"repair {mode}: took out {applied.rows_dropped} rows"
              + (f", moved {self.filled} rows into their datasets" if replay else "")
              + f", updated {applied.rows_updated}; files {applied.files_in} -> "
              f"{applied.files_out} in {applied.days} swaps (waited {applied.waited_s:.0f} s "
              f"for the grace"
              + (f"; {applied.recovered} left by an earlier run" if applied.recovered else "")
              + f"); {left} records left twice"
              + (f"; {stuck} quarantined records left for a later run" if replay else "")
              + f"; {len(problems)} problems; took {self.tick.elapsed():.1f} s")
        return 0 if not left and not problems and not stuck else 1

