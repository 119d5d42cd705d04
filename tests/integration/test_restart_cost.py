"""Start-up cost must not grow with history (DESIGN.md 4.5).

Synthetic outputs with 1, 30 and 365 days of data files for every exported type in 4
partitions (one small Parquet file per type, partition and day, with correct names), a
marker per partition, and per partition one file published after its marker (with its
intent), are recovered through a Storage that counts its calls: the number of
storage operations must be the same for every history, and the time close to equal. A
real exporter process is also started on each history; its time to the ``assigned`` log
event is printed and loosely bounded.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from garmexport.wire.schema import schema_for
from garmexport.wire.events import EXPORTED
from garmexport.protocol.naming import FileName, IntentName, MarkerName, chain_path, day_name, partition_dir
from garmexport.pipeline.parquet_io import FileFacts, to_parquet_bytes
from garmexport.pipeline.publisher import write_marker
from garmexport.pipeline.recovery import read_partition_state
from garmexport.protocol.resume import Marker
from garmexport.pipeline.router import ORIGINS
from garmexport.storage.local import LocalStorage
from tests.integration.harness import Exporter, exporter_env

PARTITIONS = 4
FIRST_DAY = 20_000  # 2024-10-04
HISTORIES = (1, 30, 365)


class CountingStorage:
    """Delegates to a Storage and counts every call by method name."""

    def __init__(self, inner: LocalStorage) -> None:
        self._inner = inner
        self.calls: Counter = Counter()

    def __getattr__(self, name: str):  # noqa: ANN204 - a transparent proxy
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


def _file(root: Path, origin: str, partition: int, day: str, topic: str, offset: int,
          body: bytes | None = None) -> None:
    """A data file at its name; ``body`` instead of a footer of its own."""
    path = root / chain_path(origin, "d", day, FileName("local", topic, partition, offset))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body if body is not None else _body(origin, partition, topic, offset))


def _body(origin: str, partition: int, topic: str, offset: int) -> bytes:
    schema = schema_for(next(t for t in EXPORTED if t.output == origin))
    table = pa.Table.from_pylist(
        [{"kafka_partition": partition, "kafka_offset": offset, "timestamp": 0}], schema=schema)
    return to_parquet_bytes([table], FileFacts("local", topic, partition, offset, offset, 1),
                            "zstd")


def build_history(root: Path, topic: str, days: int) -> None:
    """``days`` days of one file per (type, partition, day), then a marker per partition
    whose W covers them all, then one more published file (and its intent) above W.

    The files below W hold one Parquet body per (type, partition), its footer that of the
    first day's file: the recovery reads none of them (``files_checked == 1`` and the same
    storage calls for every history say so), and rendering 26,280 footers of their own
    was most of this test's minute of CPU."""
    storage = LocalStorage(root, "history")
    outputs = [t.output for t in EXPORTED]
    for p in range(PARTITIONS):
        offset = 0
        bodies: dict[str, bytes] = {}
        for d in range(days):
            for origin in outputs:
                if origin not in bodies:
                    bodies[origin] = _body(origin, p, topic, offset)
                _file(root, origin, p, day_name(FIRST_DAY + d), topic, offset, bodies[origin])
                offset += 1
        w = offset - 1
        write_marker(storage, "local", topic, MarkerName("history", p + 1),
                     Marker(p, {o: w for o in ORIGINS}, {}, w, 0))
        day = day_name(FIRST_DAY + days - 1)
        pdir = root / partition_dir("local", topic, p)
        (pdir / IntentName("fs", "d", day, offset).format()).write_bytes(b"")
        _file(root, "fs", p, day, topic, offset)


def measure_recovery(roots: dict[int, Path], topic: str, rounds: int = 60
                     ) -> dict[int, tuple[Counter, float]]:
    """Per history: the storage calls of one recovery of all partitions, and the fastest
    of ``rounds`` recoveries. The histories take turns in each round and the minimum is
    kept, so a burst of load from the tests beside this one (4 workers on 2 cores) slows
    one sample, not one history's figure: a median of consecutive rounds once put the
    365-day history at 3.4 times the 1-day one, and the minimum of 9 rounds once at 1.7
    times, with the same storage calls (a recovery takes 1-3 ms, so 60 rounds cost well
    under a second; on a quiet machine the three minimums are within 3 % of each other).
    The garbage collector is off while timing: the histories' tables built just before
    leave it work that would land in one history's sample."""
    times: dict[int, list[float]] = {days: [] for days in roots}
    calls: dict[int, Counter] = {}
    gc.collect()
    gc.disable()
    try:
        _rounds(roots, topic, rounds, times, calls)
    finally:
        gc.enable()
    return {days: (calls[days], min(times[days])) for days in roots}


def _rounds(roots: dict[int, Path], topic: str, rounds: int,
            times: dict[int, list[float]], calls: dict[int, Counter]) -> None:
    for _ in range(rounds):
        for days, root in roots.items():
            storage = CountingStorage(LocalStorage(root, "probe"))
            started = time.perf_counter()
            states = [read_partition_state(storage, "local", topic, p)
                      for p in range(PARTITIONS)]
            times[days].append(time.perf_counter() - started)
            assert all(s.files_checked == 1 for s in states)
            assert days not in calls or calls[days] == storage.calls
            calls[days] = storage.calls


def test_recovery_does_the_same_storage_work_for_1_30_and_365_days_of_history(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=PARTITIONS)
    roots = {}
    for days in HISTORIES:
        started = time.perf_counter()
        roots[days] = tmp_path / f"out-{days}"
        build_history(roots[days], topic, days)
        files = sum(1 for _ in roots[days].rglob("*.parquet"))
        assert files == PARTITIONS * (days * len(EXPORTED) + 1)
        print(f"history of {days} days: {files} files built in {time.perf_counter() - started:.1f} s")

    measured = measure_recovery(roots, topic)
    for days, (calls, seconds) in measured.items():
        print(f"recovery of {days:>3} days: {seconds * 1000:.2f} ms, storage calls {dict(calls)}")
    assert measured[1][0] == measured[30][0] == measured[365][0]
    assert measured[365][1] <= 1.5 * measured[1][1], measured

    # A real process on each history: start to assignment.
    startup = {}
    for days in HISTORIES:
        env = exporter_env(broker.bootstrap, topic, str(roots[days]),
                           SOURCE_GROUP_ID=f"restart-{days}-{topic}")
        run = Exporter(env, tmp_path, f"history-{days}")
        try:
            assigned = run.wait_event("assigned", timeout_s=60)
            startup[days] = time.monotonic() - run.started
            expected_seek = days * len(EXPORTED)  # the marker's W + 1; the extra file is skipped per chain
            assert assigned["seeks"] == {str(p): expected_seek for p in range(PARTITIONS)}
            assert run.terminate() == 0, run.tail()
        finally:
            run.close()
    print("process start -> assigned: " + ", ".join(f"{d} days {s:.2f} s" for d, s in startup.items()))
    assert startup[365] <= 2 * startup[1] + 1.0, startup
