"""``garmexport repair`` (gaps): the order of its steps, from the committed state to the
published fills, and what it prints (the CLI parses the arguments and calls :func:`run`).

Order matters: the committed state first, the output second, the topic third
(:mod:`garmexport.repair.gaps` says why); then the plan (:func:`garmexport.repair.gaps.plan`)
and, with ``applying``, its execution (:mod:`garmexport.repair.apply`).
"""

from __future__ import annotations

from garmexport.errors import BrokerError
from garmexport.protocol.naming import day_dir
from garmexport.repair.progress import Tick
from garmexport.settings.config import Config

_SHOWN = 10  # stretches printed per (place, day), runs of lost offsets in all


def run(config: Config, storage, applying: bool, timeout_s: float,  # noqa: ANN001 - Storage
        tick: Tick) -> int:
    """Plan the fills of every gap below the committed points and, with ``applying``, publish
    them; print the plan and the summary line; the exit status (the module docstring)."""
    from garmexport.pipeline.recovery import read_partition_state
    from garmexport.pipeline.router import OriginBatch, Window, route
    from garmexport.kafka.topic_scan import partitions_of, scan
    from garmexport.repair.apply import apply
    from garmexport.repair.gaps import lost_runs, plan
    from garmexport.verify.root_read import read_root

    src = config.source
    try:
        parts = partitions_of(config.consumer_settings(), src.topic)
    except BrokerError as exc:
        raise BrokerError(f"{exc}; repair reads the missing records from the broker") from None
    # 1. the committed state, before the output (a record committed then is listed next)
    states = {p: read_partition_state(storage, src.cluster, src.topic, p).state for p in parts}

    # 2. the output, as verify reads it
    root = read_root(storage, src.topic, config.jvm.cluster, config.output.root, tick)
    held = root.held
    tick(lambda s: f"read {len(held)} offsets from the output in {s:.1f} s", force=True)

    # 3. the topic: every record no row holds, routed as the exporter routes it
    window = Window.of(config.protocol)
    missing: dict[tuple[int, str], OriginBatch] = {}
    first: dict[int, int] = {}
    seen = [0]

    def on_records(partition: int, records: list) -> None:
        seen[0] += len(records)
        absent = [r for r in records if (partition, r.offset()) not in held]
        if absent:
            for origin, batch in route(absent, {}, window).batches.items():
                got = missing.get((partition, origin))
                if got is None:
                    missing[(partition, origin)] = batch
                else:
                    got.extend(batch)
        tick(lambda s: f"reading topic {src.topic!r}: {seen[0]} records, {s:.0f} s")

    ends = scan(config.consumer_settings(), src.topic, on_records, timeout_s=timeout_s,
                firsts=first)
    print(f"topic {src.topic!r} read up to its end as the read began: "
          + ", ".join(f"partition {p} at {end}" for p, end in sorted(ends.items()))
          + "; records after it are not read (they came in meanwhile: the exporters')",
          flush=True)
    tick(lambda s: f"read {seen[0]} records from topic {src.topic!r}: "
                   f"{sum(len(b.offsets) for b in missing.values())} held by no row", force=True)
    held_by: dict[int, list[int]] = {}
    for p, o in held:
        held_by.setdefault(p, []).append(o)
    lost = [run for p in parts
            for run in lost_runs(p, held_by.get(p, []), first.get(p, 0))]
    todo = plan(missing, states, lost)
    _print_plan(todo, applying)
    problems = [u.describe() for u in root.unreadable]
    for line in problems[:_SHOWN]:
        print(f"unreadable file {line}")
    if problems and todo.fills and applying:
        print("not applied: a file that cannot be read holds rows no listing can see (or "
              "was deleted while read, as compaction does): fix it, then run repair again")
    if not applying or problems:
        return _summary(todo, 0, 0, problems, applied=False, took_s=tick.elapsed())

    def on_file(fill, p) -> None:  # noqa: ANN001 - Fill, Published
        print(f"published {p.path}: {p.rows} rows, offsets {p.first_offset}..{p.last_offset}",
              flush=True)

    done = apply(config, storage, todo.fills, on_file)
    for fill, path in done.conflicts:
        print(f"conflict: {path} was published by another writer first (another repair?); "
              f"partition {fill.partition} {fill.origin}: run repair again to recompute")
    if done.hive_problem:
        print(f"hive: the repaired days are not all registered ({done.hive_problem}); "
              "garmexport compact registers them")
    rows = sum(p.rows for _, p in done.published)
    return _summary(todo, rows, len(done.published), problems + [p for _, p in done.conflicts],
                    applied=True, took_s=tick.elapsed())


def _print_plan(todo, apply: bool) -> None:  # noqa: ANN001 - Plan
    verb = "adding" if apply else "would add"
    for (place, day), found in todo.by_place(todo.adds).items():
        print(f"{day_dir(place, day)}: {verb} {sum(s.count for s in found)} rows: "
              + "; ".join(s.describe() for s in found[:_SHOWN])
              + (" ..." if len(found) > _SHOWN else ""))
    flight: dict[int, list[int]] = {}  # per partition: first, last, count (a running
    for s in todo.in_flight:            # exporter's tail: one line per partition is enough)
        got = flight.setdefault(s.partition, [s.first, s.last, 0])
        got[:] = [min(got[0], s.first), max(got[1], s.last), got[2] + s.count]
    for p, (first, last, count) in sorted(flight.items()):
        print(f"partition {p}: {count} missing records in flight (offsets {first}..{last}, "
              "above the committed point of their type): left to the exporter")
    for run in todo.lost[:_SHOWN]:
        print(f"lost for good: partition {run.partition} offsets {run.first}..{run.last} "
              f"({run.count}): no row holds them and the broker no longer does (retention); "
              "records of a type that is not exported cannot be told apart any more")
    if len(todo.lost) > _SHOWN:
        more = todo.lost[_SHOWN:]
        print(f"lost for good: {len(more)} more runs of offsets ({sum(r.count for r in more)} "
              "offsets) below the broker's first offset")
    for p in todo.unmarked:
        print(f"partition {p} has no marker: nothing is committed there yet, nothing filled "
              "(run the exporter, or 'offsets set --from-jvm' on a JVM exporter's root)")


def _summary(todo, rows: int, files: int, problems: list[str], applied: bool,  # noqa: ANN001 - Plan
             took_s: float) -> int:
    """The last line; the exit status: 0 when no gap below the committed points is left."""
    flight = sum(s.count for s in todo.in_flight)
    lost = sum(r.count for r in todo.lost)
    left = todo.rows - rows
    done = (f"added {rows} rows in {files} files; {left} not added" if applied else
            f"dry run: would add {todo.rows} rows in {len(todo.by_place(todo.adds))} "
            "(dataset, day) pairs" + (" (run with --apply to add them)" if todo.rows else ""))
    print(f"repair: {done}; {flight} in flight, left to the exporter; {lost} lost for good; "
          f"{len(problems)} problems; took {took_s:.1f} s")
    return 0 if left == 0 and lost == 0 and not problems else 1
