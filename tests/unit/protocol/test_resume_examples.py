"""Resume by example: the cases a newcomer should know, one row each (DESIGN.md 4.5).

Each row gives the markers of one partition (W per origin, and the last offset of chains
that reach past W), the files found through intents above W (their last offset read from
the footer), and what follows: where the restart seeks, and whether an event of a chain
is already committed (skipped) or must be written. Chains are written ``origin/kind/day``
with kind ``d`` (data) or ``q`` (quarantine); days are D1 < D2.
"""

from __future__ import annotations

import pytest

from garmexport.protocol.naming import IntentName
from garmexport.protocol.resume import (Chain, Marker, OriginState, PartitionState, intents_to_check,
                                        merge_state, seek_after)

D1, D2 = "2026-11-01", "2026-11-02"


def chain(text: str) -> Chain:
    origin, kind, day = text.split("/")
    return Chain(origin, kind, {"D1": D1, "D2": D2}[day])


def marker(low: dict[str, int], last: dict[str, int] | None = None) -> Marker:
    return Marker(0, low, {chain(c): o for c, o in (last or {}).items()}, 0, 0)


def intent(text: str, first: int) -> IntentName:
    c = chain(text)
    return IntentName(c.origin, c.kind, c.day, first)


# (what it shows, markers, files found by intents: (chain, first, last), seek,
#  {event "chain@offset": committed?})
EXAMPLES = [
    ("no marker yet: the configured first-run start",
     [], [], None,
     {"fs/d/D1@0": False}),
    ("one marker: resume at W + 1, the one off-by-one",
     [marker({"fs": 99})], [], 100,
     {"fs/d/D1@99": True, "fs/d/D1@100": False}),
    ("the lowest W decides the seek; events of other origins below their W are skipped",
     [marker({"fs": 99, "gc": 120})], [], 100,
     {"gc/d/D1@110": True, "gc/d/D1@120": True, "gc/d/D1@121": False, "fs/d/D1@100": False}),
    ("an old day still open holds W back; the newer day's published file is skipped",
     [marker({"fs": 1499}, {"fs/d/D2": 2999})], [], 1500,
     {"fs/d/D1@1600": False, "fs/d/D2@1600": True, "fs/d/D2@2999": True,
      "fs/d/D2@3000": False}),
    ("markers of several owners merge by maximum: each claim stays true",
     [marker({"fs": 99, "gc": 50}), marker({"fs": 80, "gc": 70})], [], 71,
     {"fs/d/D1@99": True, "gc/d/D1@70": True, "gc/d/D1@71": False}),
    ("a file published after the newest marker is found by its intent and skipped",
     [marker({"fs": 99})], [("fs/d/D1", 100, 180)], 100,
     {"fs/d/D1@150": True, "fs/d/D1@180": True, "fs/d/D1@181": False,
      "fs/d/D2@150": False}),
    ("an origin no marker names (a new type) follows the seek, not the topic's start",
     [marker({"fs": 99})], [], 100,
     {"gc/d/D1@99": True, "gc/d/D1@100": False}),
    ("quarantine and data are separate chains of one origin",
     [marker({"fs": 99}, {"fs/q/D1": 200})], [], 100,
     {"fs/q/D1@150": True, "fs/d/D1@150": False}),
    ("a chain offset at or below W says nothing more: W covers it",
     [marker({"fs": 99}, {"fs/d/D1": 50})], [], 100,
     {"fs/d/D1@50": True, "fs/d/D1@100": False}),
]


@pytest.mark.parametrize("markers,found,seek,events",
                         [e[1:] for e in EXAMPLES], ids=[e[0] for e in EXAMPLES])
def test_resume(markers: list[Marker], found: list[tuple[str, int, int]], seek: int | None,
                events: dict[str, bool]) -> None:
    published = [(intent(c, first), last) for c, first, last in found]
    state = merge_state(0, markers, published)
    assert state.seek() == seek
    for event, committed in events.items():
        c, _, offset = event.partition("@")
        ch = chain(c)
        assert (int(offset) <= state.for_origin(ch.origin).skip_bound(ch.kind, ch.day)) is committed, event


# (what it shows, markers, intents listed, the ones whose file must be looked for)
INTENT_EXAMPLES = [
    ("no marker: every intent may name a file no marker knows",
     [], [("fs/d/D1", 0), ("gc/q/D2", 5)], [("fs/d/D1", 0), ("gc/q/D2", 5)]),
    ("an intent at or below its origin's W is known to the marker: not read",
     [marker({"fs": 99})], [("fs/d/D1", 50), ("fs/d/D1", 99), ("fs/d/D2", 100)],
     [("fs/d/D2", 100)]),
    ("W is per origin: another origin's W does not cover an intent",
     [marker({"fs": 99, "gc": 10})], [("gc/d/D1", 50)], [("gc/d/D1", 50)]),
]


@pytest.mark.parametrize("markers,listed,checked",
                         [e[1:] for e in INTENT_EXAMPLES], ids=[e[0] for e in INTENT_EXAMPLES])
def test_intents_to_check(markers: list[Marker], listed: list[tuple[str, int]],
                          checked: list[tuple[str, int]]) -> None:
    intents = [intent(c, first) for c, first in listed]
    assert intents_to_check(markers, intents) == sorted(intent(c, f) for c, f in checked)


def test_the_skip_rule_is_w_or_the_chains_last_and_a_publish_advances_only_its_chain() -> None:
    state = OriginState(low=99, last={("d", "2026-11-01"): 150})
    assert state.skip_bound("d", "2026-11-01") == 150
    assert state.skip_bound("d", "2026-11-02") == 99  # a chain above W that no file reached
    assert state.skip_bound("q", "2026-11-01") == 99  # the quarantine chain of the same day
    after = state.published("d", "2026-11-02", 180)
    assert after.skip_bound("d", "2026-11-02") == 180
    assert after.skip_bound("d", "2026-11-01") == 150 and after.low == 99
    assert state.skip_bound("d", "2026-11-02") == 99  # the value is frozen: a new one is made


def test_the_seek_is_one_past_the_lowest_w_and_an_unnamed_origin_starts_there() -> None:
    state = PartitionState(0, low={"fs": 500, "gc": 120}, has_marker=True)
    assert seek_after(state.low) == state.seek() == 121
    assert state.low_of("yarn") == 120  # a type no marker names: where the others resume
    assert PartitionState(0).low_of("fs") == -1 and PartitionState(0).seek() is None
