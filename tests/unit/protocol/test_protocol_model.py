"""The commit protocol against crashes at every step, in the pure layer.

A simulated store holds published files, markers and intents. A simulated exporter of one
partition is built from the real pure modules (resume, ledger, open_files) composed the way
the actors compose them. Hypothesis chooses the events (origins and days interleaved out of
order), the batch sizes, the flush order, the marker writes and the point of a crash; after
any number of crashes and restarts the published files must hold every event exactly once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.protocol.commit_steps import INTENT, INTENT_GC, MARKER, MARKER_GC, PUBLISH, STEPS
from garmexport.protocol.ledger import PartitionLedger
from garmexport.protocol.naming import IntentName
from garmexport.protocol.open_files import OpenFiles
from garmexport.protocol.resume import (
    Chain,
    Marker,
    dominates,
    intent_is_covered,
    intents_to_check,
    merge_state,
)
from tests.hypothesis_profiles import examples

ORIGINS = ("fs", "gc", "container")
DAYS = ("2026-11-01", "2026-11-02", "2026-11-03")


class Crash(Exception):
    """The process dies here (kill -9): nothing after this point happens."""


class Fenced(Exception):
    """An exclusive publish found its name taken: another owner committed first."""


@dataclass
class Store:
    files: dict[tuple[str, str, int], tuple[int, ...]] = field(default_factory=dict)
    markers: dict[int, Marker] = field(default_factory=dict)
    intents: set[IntentName] = field(default_factory=set)
    marker_seq: int = 0

    def publish(self, key: tuple[str, str, int], offsets: tuple[int, ...]) -> bool:
        if key in self.files:
            return False
        self.files[key] = offsets
        return True


@dataclass
class Event:
    offset: int
    origin: str
    day: str


class Exporter:
    """One owner of the partition; ``fuel`` steps until a crash (None = never)."""

    def __init__(self, store: Store, events: list[Event], fuel: int | None, rng: random.Random):
        self.store, self.events, self.fuel, self.rng = store, events, fuel, rng
        markers = list(store.markers.values())
        published = [
            (i, max(store.files[(i.origin, i.day, i.first_offset)]))
            for i in intents_to_check(markers, store.intents)
            if (i.origin, i.day, i.first_offset) in store.files
        ]
        self.state = merge_state(0, markers, published)
        seek = self.state.seek()
        self.pos = 0 if seek is None else seek
        self.ledger = PartitionLedger.start(self.state, ORIGINS, self.pos)
        self.writers = {o: OpenFiles(self.state.for_origin(o)) for o in ORIGINS}
        self.pending: list[tuple[str, list[Event], int]] = []  # batches in flight to writers
        self.reports: list[tuple[str, dict]] = []  # writer reports in flight to the reader
        self.upto = {o: self.pos - 1 for o in ORIGINS}
        self.steps_taken: set[str] = set()

    def step(self, after: str | None = None) -> None:
        """A point where the process may die; ``after`` names the commit step just taken."""
        if after is not None:
            assert after in STEPS, after
            self.steps_taken.add(after)
        if self.fuel is not None:
            if self.fuel <= 0:
                raise Crash
            self.fuel -= 1

    # reader: route the next batch of records
    def read(self, n: int) -> None:
        batch = self.events[self.pos : self.pos + n]
        if not batch:
            return
        by_origin: dict[str, list[Event]] = {}
        for e in batch:
            if e.offset <= self.state.low_of(e.origin):
                continue
            by_origin.setdefault(e.origin, []).append(e)
        self.pos += len(batch)
        self.ledger.routed_upto(batch[-1].offset)
        for origin, evs in by_origin.items():
            self.ledger.sent(origin)
            # a batch carries how far routing had reached when it left the reader
            self.pending.append((origin, evs, batch[-1].offset))

    # writer: handle the oldest batch in flight
    def deliver(self) -> None:
        if not self.pending:
            return
        origin, evs, upto = self.pending.pop(0)
        w = self.writers[origin]
        for e in evs:
            if e.offset <= w.state.skip_bound("d", e.day):
                continue
            w.add("d", e.day, e.offset, e.offset, e.offset, 1, 1, 0.0, 1)
        self.upto[origin] = upto
        self.reports.append((origin, dict(handled=1, upto=upto, open_first=w.open_first())))

    def receive_report(self) -> None:
        if self.reports:
            origin, report = self.reports.pop(0)
            self.ledger.reported(origin, **report)

    def flush(self, origin: str, which: int) -> None:
        w = self.writers[origin]
        keys = w.keys()
        if not keys:
            return
        key = keys[which % len(keys)]
        f = w.get(key)
        intent = IntentName(origin, "d", f.day, f.first_offset)
        self.step()
        self.store.intents.add(intent)
        self.step(after=INTENT)
        won = self.store.publish((origin, f.day, f.first_offset), tuple(f.pieces))  # type: ignore[arg-type]
        if not won:
            raise Fenced
        self.step(after=PUBLISH)
        w.published(key)
        self.reports.append((origin, dict(
            handled=0, upto=self.upto[origin], open_first=w.open_first(),
            published=[(Chain(origin, "d", f.day), f.last_offset)],
        )))

    def write_marker(self) -> None:
        marker = self.ledger.marker(0)
        self.step()
        self.store.marker_seq += 1
        self.store.markers[self.store.marker_seq] = marker
        self.ledger.written(marker)
        last = MARKER
        for seq, old in list(self.store.markers.items()):
            if seq != self.store.marker_seq and dominates(marker, old):
                self.step(after=last)
                del self.store.markers[seq]
                last = MARKER_GC
        for intent in sorted(self.store.intents):
            if intent_is_covered(marker, intent):
                self.step(after=last)
                self.store.intents.discard(intent)
                last = INTENT_GC
        self.steps_taken.add(last)  # the next action's crash point follows the last step

    def run(self, actions: list[tuple[int, int]]) -> None:
        for kind, arg in actions:
            self.step()
            if kind == 0:
                self.read(1 + arg % 7)
            elif kind == 1:
                self.deliver()
            elif kind == 2:
                self.flush(ORIGINS[arg % len(ORIGINS)], arg // len(ORIGINS))
            elif kind == 3:
                self.write_marker()
            else:
                self.receive_report()

    def drain(self) -> None:
        """Run to the end without crashing: read everything, flush everything, mark."""
        self.fuel = None
        while self.pos < len(self.events) or self.pending:
            self.read(5)
            while self.pending:
                self.deliver()
        for origin in ORIGINS:
            while self.writers[origin].keys():
                self.flush(origin, 0)
        while self.reports:
            self.receive_report()
        self.write_marker()


def check_exact(store: Store, events: list[Event]) -> None:
    seen: dict[int, int] = {}
    for (origin, day, first), offsets in store.files.items():
        assert offsets[0] == first
        for o in offsets:
            assert events[o].origin == origin and events[o].day == day
            seen[o] = seen.get(o, 0) + 1
    duplicates = sorted(o for o, n in seen.items() if n > 1)
    missing = sorted(set(range(len(events))) - set(seen))
    assert not duplicates, f"duplicated offsets {duplicates}"
    assert not missing, f"lost offsets {missing}"


events_st = st.lists(
    st.tuples(st.sampled_from(ORIGINS), st.sampled_from(DAYS)), min_size=1, max_size=60
).map(lambda xs: [Event(i, o, d) for i, (o, d) in enumerate(xs)])
actions_st = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 50)), max_size=150)


@settings(max_examples=examples(400), deadline=None)
@given(events=events_st, runs=st.lists(st.tuples(actions_st, st.integers(0, 200)), max_size=4),
       seed=st.integers(0, 2**16))
def test_no_loss_no_duplicate_after_crashes_at_any_step(events, runs, seed):
    store = Store()
    for actions, fuel in runs:
        try:
            Exporter(store, events, fuel, random.Random(seed)).run(actions)
        except Crash:
            pass
    Exporter(store, events, None, random.Random(seed)).drain()
    check_exact(store, events)


@settings(max_examples=examples(200), deadline=None)
@given(events=events_st, actions=actions_st)
def test_restart_resumes_at_or_after_every_marker_position(events, actions):
    """W only grows: a restart never seeks before the lowest W that a marker recorded."""
    store = Store()
    Exporter(store, events, None, random.Random(0)).run(actions)
    lows = [min(m.low.values()) for m in store.markers.values()]
    again = Exporter(store, events, None, random.Random(0))
    if lows:
        assert again.pos == max(lows) + 1 or again.pos >= max(lows) + 1


def test_the_jvm_exporter_hole_of_design_4_2_does_not_lose_late_events():
    """Old-day writer open from 1500, new-day file up to 3000 committed, crash: nothing lost.

    Offsets 0..3999 of one type: 0..1499 on day 1 (committed), then from 1500 every fifth
    event is a late event of day 1 while the rest are day 2.
    """
    events = [Event(i, "fs", DAYS[0]) for i in range(1500)]
    events += [Event(i, "fs", DAYS[0] if i % 5 == 0 else DAYS[1]) for i in range(1500, 4000)]
    store = Store()
    ex = Exporter(store, events, None, random.Random(0))
    ex.read(1500)
    ex.deliver()
    ex.flush("fs", 0)  # day 1 up to 1499 committed
    while ex.reports:
        ex.receive_report()
    ex.write_marker()
    ex.read(1501)  # offsets 1500..3000
    ex.deliver()
    day2 = ex.writers["fs"].keys().index(("d", DAYS[1]))
    ex.flush("fs", day2)  # the new-day file (1501..2999) is committed first
    while ex.reports:
        ex.receive_report()
    ex.write_marker()
    marker = store.markers[store.marker_seq]
    assert marker.low["fs"] == 1499, "W stays below the open old-day file at 1500"
    assert marker.last[Chain("fs", "d", DAYS[1])] == 2999
    # crash: the old-day file (1500, 1505, ...) is never published
    again = Exporter(store, events, None, random.Random(0))
    assert again.pos == 1500, "the max-over-days rule would have resumed at 3001"
    again.drain()
    check_exact(store, events)


@settings(max_examples=examples(300), deadline=None)
@given(events=events_st, a=actions_st, b=actions_st, order=st.lists(st.booleans(), max_size=300),
       fuel=st.integers(0, 300))
def test_two_owners_racing_from_the_same_state_stay_exact(events, a, b, order, fuel):
    """A zombie and a new owner interleave; a fenced owner drops its writers and re-syncs."""
    store = Store()
    owners = [Exporter(store, events, None, random.Random(1)),
              Exporter(store, events, fuel, random.Random(2))]
    queues = [list(a), list(b)]
    fenced = [0, 0]
    for pick in order + [False] * len(a) + [True] * len(b):
        i = int(pick)
        if owners[i] is None or not queues[i]:
            continue
        try:
            owners[i].run([queues[i].pop(0)])
        except Fenced:
            fenced[i] += 1
            owners[i] = Exporter(store, events, owners[i].fuel, random.Random(3))
        except Crash:
            owners[i] = None
    Exporter(store, events, None, random.Random(0)).drain()
    check_exact(store, events)


def test_a_marker_round_trips_through_json_with_and_without_event_time():
    chain = Chain("fs", "d", "2026-11-01")
    for low_event_ms in (None, 1_795_300_000_000):
        m = Marker(3, {"fs": 10, "gc": 7}, {chain: 42}, 50, 1_795_300_001_000, low_event_ms)
        assert Marker.from_json(m.to_json()) == m


def test_the_model_takes_every_commit_step_the_exporter_names() -> None:
    """The model crashes between the same named steps as the exporter's crash points."""
    events = [Event(i, ORIGINS[i % 2], DAYS[i % 3]) for i in range(12)]
    store = Store()
    first = Exporter(store, events, None, random.Random(0))
    first.drain()
    second = Exporter(store, events, None, random.Random(0))
    second.drain()  # its marker dominates the first one
    assert first.steps_taken | second.steps_taken == set(STEPS)
    check_exact(store, events)
