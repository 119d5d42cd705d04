"""``garmexport offsets [show|set]``: committed offsets and lag; start a deployment at chosen
offsets or times.

``show`` (the default) reads each partition's committed state from the output directory
(:func:`garmexport.pipeline.recovery.read_partition_state`) and the partition's end from the broker,
and prints :mod:`garmexport.offsets.table`'s table (``--json``: its document). Partitions come
from the broker's metadata, or with ``--no-broker`` from the ``_offsets/<cluster>+<topic>/``
listing (then without end and lag). ``set`` plans with :mod:`garmexport.offsets.start_at` and
writes the markers (``--dry-run``: print only); ``set --from-jvm`` writes, for every
partition without a marker, the takeover of a Garmadon JVM exporter's root
(:mod:`garmexport.pipeline.jvm_takeover`), with a progress line per partition. Exit 0; 1 when ``set`` refuses a move (then
nothing is written for any partition); 2 on a usage error.

Broker reads (the end of a partition, the offset of a time) are
:mod:`garmexport.kafka.record_probe`'s, correct on both tansu and real Kafka.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

from garmexport.cli.arg_types import epoch_ms, non_negative_int, positive_float
from garmexport.settings.config import Config
from garmexport.errors import BrokerError, ConfigError
from garmexport.kafka.record_probe import RecordProbe, read_ends

_RECENT_MARKER_MS = 60_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("show", "set"), default="show",
                        help="show (default): committed offsets and lag; set: write markers")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--no-broker", action="store_true",
                        help="show and set: do not ask the broker (show: partitions from the "
                             "output, no end nor lag; set: --offset only, no check against "
                             "the end)")
    parser.add_argument("--timeout-s", type=positive_float, default=60.0, metavar="S",
                        help="longest wait for one broker read (default 60)")
    parser.add_argument("--partition", type=non_negative_int, action="append", default=[],
                        metavar="P",
                        help="set: a partition (repeatable; the n-th --offset/--timestamp "
                             "goes with the n-th --partition, or one value for all)")
    parser.add_argument("--all-partitions", action="store_true",
                        help="set: every partition of the topic")
    parser.add_argument("--offset", type=non_negative_int, action="append", default=[],
                        metavar="O",
                        help="set: the first offset the exporter reads")
    parser.add_argument("--timestamp", type=epoch_ms, action="append", default=[],
                        metavar="T", help="set: start at the first record whose Kafka "
                        "timestamp is >= T (ISO 8601, UTC if no zone; or epoch ms)")
    parser.add_argument("--from-jvm", action="store_true",
                        help="set: take the partitions without a marker over from the Garmadon "
                             "JVM exporter's files in the root (reads their footers here, not "
                             "in the exporter's assignment; README, Taking over from the JVM "
                             "exporter)")
    parser.add_argument("--force", action="store_true",
                        help="set: allow moving back over committed data, or past the end")
    parser.add_argument("--dry-run", action="store_true", help="set: print, write nothing")


def _partitions(args: argparse.Namespace, config: Config, storage) -> list[int]:
    from garmexport.kafka.topic_scan import REACH_TIMEOUT_S, partitions_of
    from garmexport.protocol.naming import OFFSETS_DIR

    if not args.no_broker:
        try:
            return partitions_of(config.consumer_settings(), config.source.topic,
                                 min(args.timeout_s, REACH_TIMEOUT_S))
        except BrokerError as exc:
            hint = ("; --timestamp needs the broker: start it, or give --offset with "
                    "--no-broker" if args.action == "set" and args.timestamp
                    else "; pass --no-broker to read only the output directory")
            raise BrokerError(f"{exc}{hint}") from None
    src = config.source
    listed = storage.list(f"{OFFSETS_DIR}/{src.cluster}+{src.topic}")
    return sorted(int(e.name) for e in listed if e.is_dir and e.name.isdigit())


def main(args: argparse.Namespace, config: Config) -> int:
    from garmexport.storage.options import from_output
    from garmexport.storage.root_check import open_existing

    if args.action == "show" and (args.partition or args.all_partitions or args.offset
                                  or args.timestamp or args.force or args.dry_run
                                  or args.from_jvm):
        raise ConfigError("--partition, --all-partitions, --offset, --timestamp, --from-jvm, "
                          "--force and --dry-run belong to 'offsets set'")
    storage = open_existing(config.output.root, f"offsets-{uuid.uuid4().hex[:8]}",
                            from_output(config.output))
    if args.action == "set" and args.from_jvm:
        return _set_from_jvm(args, config, storage)
    if args.action == "set":
        return _set(args, config, storage)
    return _show(args, config, storage)


def _show(args: argparse.Namespace, config: Config, storage) -> int:
    from garmexport.offsets.table import build_row, render, to_json
    from garmexport.pipeline.recovery import read_partition_state

    from garmexport.pipeline.jvm_recovery import JvmScan
    from garmexport.pipeline.router import exported_origins

    src = config.source
    jvm = JvmScan(storage, exported_origins(), config.jvm.cluster) if config.jvm.takeover else None
    partitions = _partitions(args, config, storage)
    if args.no_broker and jvm is not None:  # a JVM root before its takeover has no _offsets
        partitions = sorted(set(partitions) | set(jvm.partitions()))
    ends = {} if args.no_broker else read_ends(config.consumer_settings(), src.topic,
                                               partitions, args.timeout_s)
    rows = []
    for p in partitions:
        rec = read_partition_state(storage, src.cluster, src.topic, p, jvm)
        low, end = ends.get(p, (None, None))
        first = low if src.start == "earliest" else end
        known = rec.markers or rec.intents or rec.jvm
        rows.append(build_row(p, rec if known else None, end, first))
    if args.json:
        print(json.dumps(to_json(src.cluster, src.topic, rows), indent=2))
    else:
        print(render(src.cluster, src.topic, rows))
    return 0


def _targets(args: argparse.Namespace, partitions: list[int]) -> dict[int, int]:
    """partition -> offset or timestamp (whichever was given); raises ConfigError."""
    values = args.offset or args.timestamp
    if bool(args.offset) == bool(args.timestamp):
        raise ConfigError("offsets set needs --offset or --timestamp (not both)")
    if bool(args.partition) == args.all_partitions:
        raise ConfigError("offsets set needs --partition P (repeatable) or --all-partitions")
    chosen = partitions if args.all_partitions else args.partition
    if len(values) not in (1, len(chosen)) or (args.all_partitions and len(values) != 1):
        raise ConfigError("give one --offset/--timestamp for all partitions, or one per --partition")
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"a partition is given twice: {chosen}")
    unknown = sorted(set(chosen) - set(partitions)) if partitions else []
    if unknown:
        raise ConfigError(f"partitions {unknown} are not in the topic ({len(partitions)} partitions)")
    return {p: values[0] if len(values) == 1 else values[i] for i, p in enumerate(chosen)}


def _set(args: argparse.Namespace, config: Config, storage) -> int:
    from garmexport.offsets.start_at import apply, first_offset_at_or_after, plan_move
    from garmexport.pipeline.recovery import read_partition_state
    from garmexport.pipeline.router import ORIGINS

    src, settings = config.source, config.consumer_settings()
    if args.timestamp and args.no_broker:
        raise ConfigError("--timestamp needs the broker: drop --no-broker")
    partitions = _partitions(args, config, storage) if (args.all_partitions or not args.no_broker) else []
    targets = _targets(args, partitions)
    ends = {} if args.no_broker else read_ends(settings, src.topic, sorted(targets), args.timeout_s)
    now_ms = int(time.time() * 1000)
    moves, found = [], {}
    probe = RecordProbe(settings, src.topic, args.timeout_s) if args.timestamp else None
    try:
        for p, value in sorted(targets.items()):
            low, end = ends.get(p, (None, None))
            offset = value
            if probe is not None:
                hint = probe.offsets_for_times(p, value, end)
                offset, probes, trusted = first_offset_at_or_after(
                    value, low, end, lambda o, p=p: probe.at(p, o), hint)
                found[p] = {"timestamp_ms": value, "offset": offset, "broker_answer": hint,
                            "broker_answer_trusted": trusted, "probes": probes}
            rec = read_partition_state(storage, src.cluster, src.topic, p)
            first = low if src.start == "earliest" else end
            moves.append((plan_move(p, offset, rec if rec.markers or rec.intents else None,
                                    ORIGINS, now_ms=now_ms, force=args.force, end=end,
                                    first_run_start=first), rec))
    finally:
        if probe is not None:
            probe.close()
    refused = [m for m, _ in moves if m.refused]
    written: dict[int, list[str]] = {}
    if not refused and not args.dry_run:
        for move, _ in moves:
            written[move.partition] = apply(storage, src.cluster, src.topic, move)
    running = [m.partition for m, rec in moves
               if any(now_ms - mk.written_at_ms < _RECENT_MARKER_MS for mk in rec.markers.values())]
    _report_set(args, moves, found, written, refused, running)
    return 1 if refused else 0


def _set_from_jvm(args: argparse.Namespace, config: Config, storage) -> int:
    from garmexport.pipeline.jvm_recovery import JvmScan
    from garmexport.pipeline.jvm_takeover import take_over
    from garmexport.pipeline.router import exported_origins

    if args.offset or args.timestamp or args.force:
        raise ConfigError("--from-jvm takes no --offset, --timestamp nor --force: the JVM "
                          "exporter's files give the offsets, and nothing moves back")
    if not config.jvm.takeover:
        raise ConfigError("--from-jvm needs [jvm] takeover = true")
    if bool(args.partition) == args.all_partitions:
        raise ConfigError("offsets set needs --partition P (repeatable) or --all-partitions")
    src = config.source
    jvm = JvmScan(storage, exported_origins(), config.jvm.cluster)
    started = time.monotonic()
    if args.all_partitions:
        partitions = _partitions(args, config, storage)
        if args.no_broker:  # a JVM root before its takeover has no _offsets
            partitions = sorted(set(partitions) | set(jvm.partitions()))
    else:
        partitions = sorted(set(args.partition))
    print(f"taking over {len(partitions)} partition(s) of {src.topic} from the JVM exporter's "
          f"files in {storage.uri}", file=sys.stderr, flush=True)

    def progress(t) -> None:  # noqa: ANN001 - a TakenOver
        if args.json:
            return
        what = (f"seek {t.seek}, {len(t.found)} types, {t.footers_read} footers in "
                f"{t.seconds:.1f} s: {t.outcome}" if t.found else t.outcome)
        print(f"partition {t.partition}: {what} ({time.monotonic() - started:.1f} s so far)",
              flush=True)
        for origin, f in sorted(t.found.items()):
            print(f"  {origin:<30} after {f.offset:<12} from {f.path}", flush=True)

    done = take_over(storage, src.cluster, src.topic, partitions, jvm,
                     dry_run=args.dry_run, progress=progress)
    seconds = time.monotonic() - started
    if args.json:
        print(json.dumps({"dry_run": args.dry_run, "seconds": round(seconds, 3),
                          "footers_read": jvm.footers_read, "partitions": [
            {"partition": t.partition, "outcome": t.outcome, "seek": t.seek,
             "jvm": {o: {"offset": f.offset, "file": f.path} for o, f in sorted(t.found.items())},
             "footers_read": t.footers_read, "seconds": round(t.seconds, 3),
             "written": list(t.written)} for t in done]}, indent=2))
    else:
        taken = sum(1 for t in done if t.found)
        print(f"offsets set --from-jvm: {taken} partition(s) taken over"
              f"{' (dry run: nothing written)' if args.dry_run else ''}, {jvm.footers_read} "
              f"footers read in {seconds:.1f} s", file=sys.stderr)
    return 0


def _report_set(args, moves, found, written, refused, running) -> None:
    if args.json:
        print(json.dumps({"dry_run": args.dry_run, "refused": bool(refused), "partitions": [
            {"partition": m.partition, "old_seek": m.old_seek, "old_position": m.old_position,
             "new_seek": m.new_seek, "skipped": m.skipped, "behind": list(m.behind),
             "refused": m.refused, "warnings": list(m.warnings), "unchanged": m.marker is None
             and not m.refused, "written": written.get(m.partition, []),
             **({"search": found[m.partition]} if m.partition in found else {})}
            for m, _ in moves]}, indent=2))
        return
    for m, _ in moves:
        how = found.get(m.partition)
        via = (f" (timestamp {how['timestamp_ms']}: broker said {how['broker_answer']}, "
               f"{'trusted' if how['broker_answer_trusted'] else 'searched'}, "
               f"{how['probes']} probes)") if how else ""
        old = "none (first run)" if m.old_seek is None else m.old_seek
        state = ("REFUSED: " + m.refused) if m.refused else "unchanged" if m.marker is None \
            else "dry run" if args.dry_run else "written" if m.partition in written else "not written"
        print(f"partition {m.partition}: seek {old} -> {m.new_seek}{via}: {state}")
        for w in m.warnings:
            print(f"  warning: {w}", file=sys.stderr)
        for path in written.get(m.partition, [])[1:]:
            print(f"  deleted {path}")
        if args.dry_run and m.marker is not None:
            for name in list(m.delete_markers) + list(m.delete_intents):
                print(f"  would delete {name.format()}")
    if refused:
        print(f"offsets set: {len(refused)} partition(s) refused; nothing was written",
              file=sys.stderr)
    if running:
        print(f"warning: partitions {running} have markers from the last minute: stop every "
              "exporter before setting offsets (its own markers would win)", file=sys.stderr)
