"""CPU time of the reader's routing of a poll (``router.route``), per 1M records.

``python tests/bench/bench_route.py [--poll 20000] [--polls 5] [--rounds 7] [--bad-share 0.002]``

Not a test: a micro-benchmark of one function, to compare two versions of the router (run
it in two checkouts, back to back, on a quiet machine). The input is the benchmark's
workload: generator records (the default type mix, 5 % late, ``--bad-share`` malformed
records of every kind) of ONE partition, cut into polls of ``--poll`` records in offset
order, as the reader gets them. The records are ``confluent_kafka.Message`` objects built
with its constructor, so ``value()``, ``offset()``... are the C methods the reader calls
(``--records python``: a small Python class with the same methods). Before each call the
poll's records are built anew, values copied, as a real poll allocates them, so they are
in the CPU's caches as much as after a poll; only the call is timed (process CPU time).

A round routes every poll once (nothing committed, unless ``--committed`` puts that share
of each poll at or below every origin's low). It prints, per function (``route``; with
``--each`` also the per-record reference ``route_each``), the median over the rounds in
CPU-seconds per 1M records, after checking that what is timed gives the reference's result.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from garmexport.pipeline.router import ORIGINS, KafkaRecord, RoutedPoll, Window, route, route_each  # noqa: E402
from garmexport.testbed.generator import Spec, generate  # noqa: E402
from garmexport.protocol.resume import OriginState  # noqa: E402
from kafka_records import PyRecord  # noqa: E402 - tests/bench, the script's directory

NOW_MS = 1_795_300_000_000
DAY_MS = 86_400_000


Raw = tuple[int, "bytes | None", int]  # offset, value, Kafka timestamp


def make_polls(args: argparse.Namespace) -> list[list[Raw]]:
    spec = Spec(now_ms=NOW_MS, partitions=1, bad_share=args.bad_share, late_share=args.late_share)
    raw = [(offset, r.value, r.timestamp_ms)
           for offset, r in enumerate(generate(spec, args.poll * args.polls))]
    return [raw[i:i + args.poll] for i in range(0, len(raw), args.poll)]


def records_of(poll: list[Raw], kind: str) -> list[KafkaRecord]:
    """The poll's records as the consumer hands them over: new objects, values just copied
    (so they are in the CPU's caches as much as after a real poll, not more, not less)."""
    fresh = [(o, None if v is None else bytes(memoryview(v)), ts) for o, v, ts in poll]
    if kind == "message":
        from confluent_kafka import Message

        return [Message(topic="garmadon", partition=0, offset=o, key=None, value=v, timestamp=(1, ts))
                for o, v, ts in fresh]
    return [PyRecord(o, v, ts, None) for o, v, ts in fresh]


def cpu_per_million(fn: Callable[[Sequence[KafkaRecord], dict, Window], RoutedPoll],
                    polls: list[list[Raw]], lows: list[dict], window: Window, kind: str) -> float:
    spent = 0.0
    for poll, low in zip(polls, lows):
        records = records_of(poll, kind)
        start = time.process_time()
        fn(records, low, window)
        spent += time.process_time() - start
        del records
    return spent / sum(map(len, polls)) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--poll", type=int, default=20_000, help="records per poll (20000)")
    parser.add_argument("--polls", type=int, default=5, help="polls per round (5)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds; medians are printed (7)")
    parser.add_argument("--bad-share", type=float, default=0.002, help="malformed records (0.002)")
    parser.add_argument("--late-share", type=float, default=0.05, help="late events (0.05)")
    parser.add_argument("--past-days", type=float, default=30.0,
                        help="window into the past, days (30, the default configuration)")
    parser.add_argument("--future-s", type=float, default=3600.0,
                        help="window into the future, seconds (3600, the default)")
    parser.add_argument("--clamp", action="store_true", help="clamp events outside the window")
    parser.add_argument("--committed", type=float, default=0.0,
                        help="share of each poll's records at or below every origin's low (0)")
    parser.add_argument("--records", choices=("message", "python"), default="message",
                        help="confluent_kafka.Message (default) or a Python class")
    parser.add_argument("--each", action="store_true", help="also time route_each, the reference")
    args = parser.parse_args(argv)

    polls = make_polls(args)
    window = Window(int(args.past_days * DAY_MS), int(args.future_s * 1000), clamp=args.clamp)
    lows = [{o: OriginState(p[0][0] + int(args.committed * len(p)) - 1, {}) for o in ORIGINS}
            if args.committed
            else {} for p in polls]
    quarantined = sum(sum(route_each(records_of(p, args.records), low, window).quarantined.values())
                      for p, low in zip(polls, lows))
    fns: dict[str, Callable] = {"route": route}
    if args.each:
        fns["route_each"] = route_each
    for fn in fns.values():  # what is timed gives the reference's result
        assert all(fn(r, lo, window) == route_each(r, lo, window)
                   for r, lo in ((records_of(p, args.records), lo) for p, lo in zip(polls, lows)))
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(args.rounds):
        order = list(fns.items()) if r % 2 == 0 else list(fns.items())[::-1]
        for name, fn in order:
            times[name].append(cpu_per_million(fn, polls, lows, window, args.records))
    print(f"{len(polls)} polls of {args.poll} records ({args.records}), bad {args.bad_share}, "
          f"late {args.late_share}, window {window}, committed {args.committed}; "
          f"{quarantined / len(polls):.0f} records quarantined per poll")
    for name, values in times.items():
        print(f"{name:>11}: median {statistics.median(values):.3f} CPU-s per 1M records "
              f"(min {min(values):.3f}, max {max(values):.3f}, {args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
