"""A swap with a metastore view: a reader through the metastore never sees a row twice or
misses one, whatever action a crash interrupts, during recovery too; ``_COMPLETE`` is gone
from the commit point on; the view is deleted only after the grace."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garmexport.compaction import retired
from garmexport.compaction.names import COMPLETE, RETIRED_DIR, journal_path, staging_path, view_path
from garmexport.compaction.recover import (Outcome, advance, commit, commit_swap, finish,
                                           recover_all)
from garmexport.compaction.swap import (Copy, Delete, DeleteTree, Flipped, Journal, Locate, Move,
                                        Rename, Retire, WriteFile, roll_forward)
from garmexport.errors import ProtocolViolation
from tests.unit.compaction.test_compaction_swap import MemFs

OUT, DAYNAME = "fs", "2026-11-01"
DAY = f"{OUT}/day={DAYNAME}"
VIEW = view_path(OUT, DAYNAME, 3)
LATE = f"{DAY}/local+t+00001+{500:020d}.parquet"


class Crash(Exception):
    pass


def rows(data: bytes) -> list[str]:
    return data.decode().split(",") if data else []


class World:
    """Files, the partition's location, and a reader that checks every state it can see."""

    def __init__(self, files: dict[str, bytes], expected: list[str], late_at: int | None):
        self.fs = CheckedFs(self, files)
        self.location = DAY
        self.expected = sorted(expected)
        self.late_at, self.late = late_at, False
        self.ops = 0
        self.crash_at: int | None = None
        self.committed = False

    def locate(self, output: str, day: str, path: str) -> None:
        assert (output, day) == (OUT, DAYNAME)
        self.tick()
        self.location = path
        self.check()

    def tick(self) -> None:
        if self.crash_at is not None and self.ops >= self.crash_at:
            self.crash_at = None
            raise Crash
        self.ops += 1

    def seen(self) -> list[str]:
        """Rows a metastore reader sees now: every non-hidden file of the location."""
        prefix = self.location + "/"
        return sorted(r for p, v in self.fs.files.items() if p.startswith(prefix)
                      and "/" not in p[len(prefix):] and p[len(prefix)] not in "_."
                      for r in rows(v))

    def check(self) -> None:
        if self.late_at is not None and self.ops >= self.late_at and not self.late:
            self.late = True  # the exporter publishes a late file into the day
            self.fs.files[LATE] = b"late1,late2"
        seen = self.seen()
        assert len(seen) == len(set(seen)), f"a row seen twice: {seen}"
        base = [r for r in seen if not r.startswith("late")]
        assert base == self.expected, f"{self.location}: {base} != {self.expected}"
        if self.fs.files.get(journal_path(OUT, DAYNAME, 3)) is not None:
            self.committed = True
        if self.committed and any(p.endswith("/" + COMPLETE) for p in self.fs.files):
            # the run writes _COMPLETE again only once the swap is over (journal gone)
            assert journal_path(OUT, DAYNAME, 3) not in self.fs.files


class CheckedFs(MemFs):
    """MemFs with copies, counting mutating calls (for crashes) and checking the reader."""

    def __init__(self, world: World, files: dict[str, bytes]) -> None:
        super().__init__(files)
        self.world = world

    def _do(self, fn, *args: object) -> None:  # noqa: ANN001
        self.world.tick()
        fn(*args)
        self.world.check()

    def write(self, path: str, data: bytes) -> None:
        self._do(super().write, path, data)

    def rename(self, src: str, dst: str) -> None:
        self._do(super().rename, src, dst)

    def copy(self, src: str, dst: str) -> None:
        def cp(s: str, d: str) -> None:
            assert d not in self.files, "copy must never overwrite"
            self.files[d] = self.files[s]
        self._do(cp, src, dst)

    def delete(self, path: str) -> None:
        self._do(super().delete, path)

    def delete_tree(self, path: str) -> None:
        self._do(super().delete_tree, path)


def make(n_out: int, n_in: int, late_at: int | None = None) -> tuple[Journal, World]:
    staging = staging_path(OUT, DAYNAME, 3)
    inputs = [f"{DAY}/local+t+00000+{i:020d}.parquet" for i in range(n_in)]
    files = {p: f"r{i}a,r{i}b".encode() for i, p in enumerate(inputs)}
    kept = f"{DAY}/local+t+00001+{99:020d}.parquet"  # above W: stays, so the view needs it
    files[kept] = b"k1"
    files[f"{DAY}/{COMPLETE}"] = b"{}"
    groups = [inputs[k::n_out] for k in range(n_out)]
    moves = []
    for k, group in enumerate(groups):
        m = Move(f"{staging}/part-{k:05d}.parquet", f"{DAY}/local+t+c000003+{k:05d}.parquet",
                 f"{DAY}/_local+t+c000003+{k:05d}.json", f'{{"k": {k}}}')
        files[m.staged] = b",".join(files[p] for p in group)
        moves.append(m)
    journal = Journal(OUT, DAYNAME, 3, staging, tuple(moves), tuple(inputs), VIEW)
    expected = [r for p in inputs for r in rows(files[p])] + ["k1"]
    return journal, World(files, expected, late_at)


def replay(world: World, runs: list[Callable[[], object]], crashes: list[int]) -> None:
    """Run ``runs`` in order, the first ones each cut off by a crash after ``crashes[k]``
    operations (a run that ends sooner is not cut), the last one whole."""
    for limit, step in zip([*crashes, None], runs):
        world.crash_at = limit
        try:
            step()
        except Crash:
            pass
    world.crash_at = None


@given(n_out=st.integers(1, 3), n_in=st.integers(1, 5),
       crashes=st.lists(st.integers(0, 30), max_size=3),
       late_at=st.none() | st.integers(0, 30))
def test_a_metastore_reader_sees_every_row_once_whatever_a_crash_interrupts(
        n_out: int, n_in: int, crashes: list[int], late_at: int | None) -> None:
    journal, world = make(n_out, n_in, late_at)
    world.check()
    runs = [lambda: commit_swap(world.fs, journal, lambda s: None, world.locate, 1000)]
    runs += [lambda: recover_all(world.fs, world.locate, 2000) for _ in crashes]
    replay(world, runs, crashes)
    recover_all(world.fs, world.locate, 3000)
    world.check()
    if journal_path(OUT, DAYNAME, 3) in world.fs.files or world.location != DAY:
        raise AssertionError("recovery left the swap unfinished")
    if any(m.final in world.fs.files for m in journal.moves):  # committed: swapped
        assert world.location == DAY
        assert not any(p in world.fs.files for p in journal.deletes)
        assert not any(p.startswith(journal.staging + "/") for p in world.fs.files)
        assert f"{RETIRED_DIR}/{OUT}/day={DAYNAME}/g000003.json" in world.fs.files
        assert f"{DAY}/{COMPLETE}" not in world.fs.files  # the run writes it, not the swap
    if world.late:
        assert sorted(r for r in world.seen() if r.startswith("late")) == ["late1", "late2"]


def test_the_view_holds_the_outputs_and_what_the_swap_keeps_before_the_first_flip() -> None:
    journal, world = make(2, 3)
    present = frozenset(world.fs.files)
    actions = roll_forward(journal, present, "j")
    m0, m1 = journal.moves
    kept = f"{DAY}/local+t+00001+{99:020d}.parquet"
    assert actions == [
        Rename(m0.staged, journal.in_view(m0)), Rename(m1.staged, journal.in_view(m1)),
        Copy(kept, f"{VIEW}/{kept.rpartition('/')[2]}"),
        Locate(VIEW), Flipped(journal.flip_record),
        WriteFile(m0.sidecar, m0.sidecar_body), Copy(journal.in_view(m0), m0.final, True),
        WriteFile(m1.sidecar, m1.sidecar_body), Copy(journal.in_view(m1), m1.final, True),
        *(Delete(p) for p in journal.deletes),
        Locate(DAY, back=True), Retire(VIEW), DeleteTree(journal.staging),
        Delete(journal.flip_record), Delete("j")]


def test_a_swapped_day_only_flips_back_and_cleans_up() -> None:
    journal, world = make(1, 2)
    commit_swap(world.fs, journal, lambda s: None, world.locate, 1000)
    swapped = frozenset(world.fs.files)
    assert finish(world.fs, journal, locator=world.locate) == 0.0  # published nothing
    assert roll_forward(journal, swapped, "j") == [
        Locate(DAY, back=True), Retire(VIEW), DeleteTree(journal.staging),
        Delete(journal.flip_record), Delete("j")]


def test_an_output_missing_everywhere_keeps_every_input() -> None:
    journal, world = make(2, 2)
    del world.fs.files[journal.moves[1].staged]
    try:
        roll_forward(journal, frozenset(world.fs.files), "j")
    except ProtocolViolation:
        pass
    else:
        raise AssertionError("expected ProtocolViolation")


def test_a_swap_with_a_view_needs_the_metastore() -> None:
    journal, world = make(1, 1)
    try:
        commit_swap(world.fs, journal, lambda s: None, None, 1000)
    except ProtocolViolation as exc:
        assert "Hive on" in str(exc)
    else:
        raise AssertionError("expected ProtocolViolation")
    assert all(p in world.fs.files for p in journal.deletes)  # nothing visible changed


def test_the_commit_removes_complete_before_the_journal_exists() -> None:
    journal, world = make(1, 1)
    steps: list[tuple[str, bool, bool]] = []

    def crash(step: str) -> None:
        steps.append((step, f"{DAY}/{COMPLETE}" in world.fs.files,
                      journal_path(OUT, DAYNAME, 3) in world.fs.files))

    window = commit_swap(world.fs, journal, crash, world.locate, 1000)
    assert window > 0  # first output published to last input deleted
    assert steps[0] == ("before-journal", False, False)
    assert [s for s, _, _ in steps] == ["before-journal", "after-journal", "mid-view",
                                        "after-view", "after-flip", "mid-publish",
                                        "after-publish", "mid-delete", "after-delete",
                                        "after-unflip"]


def test_a_retired_view_is_deleted_only_after_the_grace() -> None:
    journal, world = make(1, 2)
    commit_swap(world.fs, journal, lambda s: None, world.locate, 1000)
    assert any(p.startswith(VIEW + "/") for p in world.fs.files)
    assert retired.sweep(world.fs, 1000 + 3_599_999, 3600.0) == 0
    assert any(p.startswith(VIEW + "/") for p in world.fs.files)
    assert retired.sweep(world.fs, 1000 + 3_600_000, 3600.0) == 1
    assert not any(p.startswith(VIEW + "/") or p.startswith(RETIRED_DIR) for p in world.fs.files)
    world.check()  # the day is intact


def test_the_journal_of_a_view_round_trips_and_an_old_one_reads_without_view() -> None:
    journal, _ = make(2, 2)
    assert Journal.from_json(journal.to_json()) == journal
    old = json.loads(journal.to_json())
    del old["view"]
    assert Journal.from_json(json.dumps(old).encode()).view == ""


def test_on_a_local_disk_the_view_shares_the_outputs_bytes_and_copies_never_overwrite(
        tmp_path: object) -> None:
    from garmexport.compaction.fs import LocalFs
    from garmexport.errors import StorageError

    journal, world = make(2, 3)
    fs = LocalFs(str(tmp_path))
    for p, v in world.fs.files.items():
        fs.write(p, v)
    located: list[str] = []
    commit_swap(fs, journal, lambda s: None, lambda o, d, p: located.append(p), 1000)
    assert located == [VIEW, DAY]
    for m in journal.moves:
        final, viewed = (os.stat(os.path.join(str(tmp_path), p))
                         for p in (m.final, journal.in_view(m)))
        assert final.st_ino == viewed.st_ino  # a hard link: no second copy of the bytes
    kept = "local+t+00001+" + f"{99:020d}.parquet"
    assert fs.read(f"{VIEW}/{kept}") == b"k1"
    assert sorted(e.name for e in fs.list(VIEW)) == sorted(
        [journal.in_view(m).rpartition("/")[2] for m in journal.moves] + [kept])
    with pytest.raises(StorageError):
        fs.copy(f"{DAY}/{kept}", journal.moves[0].final)
    assert fs.read(journal.moves[0].final) != b"k1"


# --- the grace: the day directory changes only once no query can still read what it listed

GRACE_MS = 60_000


class GraceWorld(World):
    """A World with a wall clock, that remembers when a metastore reader last saw each
    file and fails a deletion that comes sooner than the grace after it."""

    def __init__(self, files: dict[str, bytes], expected: list[str], late_at: int | None):
        super().__init__(files, expected, late_at)
        self.now = 0
        self.listed_at: dict[str, int] = {}
        self.fs = GraceFs(self, files)

    def clock(self) -> int:
        return self.now

    def check(self) -> None:
        super().check()
        prefix = self.location + "/"
        for p in self.fs.files:
            if (p.startswith(prefix) and "/" not in p[len(prefix):]
                    and p[len(prefix)] not in "_."):
                self.listed_at[p] = self.now  # a query planned now may read p later


class GraceFs(CheckedFs):
    def delete(self, path: str) -> None:
        seen = self.world.listed_at.get(path)  # type: ignore[attr-defined]
        if seen is not None and path in self.files:
            assert self.world.now - seen >= GRACE_MS, \
                f"{path} deleted {self.world.now - seen} ms after a query could list it"
        super().delete(path)


def make_grace(n_out: int, n_in: int, late_at: int | None = None) -> tuple[Journal, GraceWorld]:
    journal, world = make(n_out, n_in, late_at)
    return journal, GraceWorld(world.fs.files, world.expected, late_at)


def wait_round(world: GraceWorld, journal: Journal, crash: Callable[[str], None] = lambda s: None,
               grace_s: float = GRACE_MS / 1000, locate: Callable[[str, str, str], None] | None = None
               ) -> Outcome:
    """One round of the run's grace wait (:func:`garmexport.compaction.grace.wait_out`):
    the flip if the swap has none, a sweep, or the swap's end once it is due."""
    return advance(world.fs, journal, crash, locate or world.locate, 1000, grace_s,
                   world.clock, flip=True)


@given(n_out=st.integers(1, 3), n_in=st.integers(1, 5),
       crashes=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 2 * GRACE_MS)),
                        max_size=3),
       late_at=st.none() | st.integers(0, 30))
def test_no_file_a_metastore_query_listed_is_deleted_before_the_grace_crash_or_not(
        n_out: int, n_in: int, crashes: list[tuple[int, int]], late_at: int | None) -> None:
    journal, world = make_grace(n_out, n_in, late_at)
    world.now = 1_000_000
    world.check()
    grace_s = GRACE_MS / 1000

    def first() -> None:  # a run: the commit, then its wait's first round (the flip)
        commit(world.fs, journal, lambda s: None, world.locate, 1000, grace_s, world.clock)
        wait_round(world, journal)

    def retry() -> None:  # a later run: the recovery, then its wait's round
        if recover_all(world.fs, world.locate, 2000, grace_s, world.clock).waiting:
            wait_round(world, journal)

    def later(by: int) -> Callable[[], None]:
        def step() -> None:
            world.now += by
            retry()
        return step

    replay(world, [first] + [later(by) for _, by in crashes], [c for c, _ in crashes])
    for _ in range(3):  # runs until the swap is due, then one that finishes it
        retry()
        world.now += GRACE_MS
    world.check()
    assert journal_path(OUT, DAYNAME, 3) not in world.fs.files and world.location == DAY
    if world.late:
        assert sorted(r for r in world.seen() if r.startswith("late")) == ["late1", "late2"]


def test_a_swap_waits_at_its_view_with_the_day_directory_untouched_then_finishes() -> None:
    journal, world = make_grace(1, 2)
    world.now = 5_000
    before = {p: v for p, v in world.fs.files.items() if p.startswith(DAY + "/")
              and not p.endswith(COMPLETE)}
    outcome = commit(world.fs, journal, lambda s: None, world.locate, 1000, 60.0, world.clock)
    assert outcome.due_at_ms == 5_000 + 60_000  # at the earliest: the flip is to come
    assert world.location == DAY and journal.flip_record not in world.fs.files
    assert all(journal.in_view(m) in world.fs.files for m in journal.moves)  # the view

    world.now = 10_000  # the run's wait flips the day to its view
    assert wait_round(world, journal).due_at_ms == 10_000 + 60_000
    assert world.location == VIEW
    assert {p: v for p, v in world.fs.files.items() if p.startswith(DAY + "/")
            and not p.startswith(VIEW)} == before  # path readers: the day before
    assert json.loads(world.fs.files[journal.flip_record]) == {"flipped_at_ms": 10_000}

    world.now = 30_000  # the exporter publishes a late file: the wait's sweep copies it
    world.fs.files[LATE] = b"late1,late2"
    assert wait_round(world, journal).due_at_ms == 70_000
    assert f"{VIEW}/{LATE.rpartition('/')[2]}" in world.fs.files
    assert world.location == VIEW and all(p in world.fs.files for p in journal.deletes)

    world.now = 70_000
    assert wait_round(world, journal).due_at_ms is None
    assert world.location == DAY and not any(p in world.fs.files for p in journal.deletes)
    assert journal.flip_record not in world.fs.files
    assert journal_path(OUT, DAYNAME, 3) not in world.fs.files
    assert sorted(r for r in world.seen() if r.startswith("late")) == ["late1", "late2"]


def test_a_relaunch_puts_a_swap_killed_in_its_grace_back_on_the_day_directory_until_its_wait(
        ) -> None:
    """A run killed while it waited out the grace left the partition on the view. The
    relaunch recovers before Spark starts, then starts Spark and compacts the other days
    before it waits: a minute or more in which nothing would sweep the view, and late
    files published into the day would be missing from the table (issue 40: 20.7 s). So
    the recovery points the partition back at the day directory, still the day before the
    swap, and the relaunch's wait flips again, its grace counted from then."""
    journal, world = make_grace(1, 2)
    world.now = 5_000
    commit(world.fs, journal, lambda s: None, world.locate, 1000, 60.0, world.clock)
    wait_round(world, journal)
    assert world.location == VIEW
    world.now = 30_000  # killed; relaunched
    recovered = recover_all(world.fs, world.locate, 2000, 60.0, world.clock)
    assert recovered.rolled_forward == 0 and recovered.rolled_back == 0
    assert [w.due_at_ms for w in recovered.waiting] == [30_000 + 60_000]
    assert world.location == DAY and journal.flip_record not in world.fs.files
    assert all(journal.in_view(m) in world.fs.files for m in journal.moves)  # staging kept
    assert all(p in world.fs.files for p in journal.deletes)

    world.now = 40_000  # the relaunch is ready to sweep: its wait flips
    world.fs.files[LATE] = b"late1,late2"
    assert wait_round(world, journal).due_at_ms == 40_000 + 60_000
    assert world.location == VIEW and f"{VIEW}/{LATE.rpartition('/')[2]}" in world.fs.files
    world.now = 99_999
    assert wait_round(world, journal).due_at_ms == 100_000  # never sooner than the grace
    world.now = 100_000
    assert wait_round(world, journal).due_at_ms is None and world.location == DAY


@pytest.mark.parametrize("grace_s", [60.0, 0.0])
def test_a_file_published_between_the_view_s_fill_and_the_flip_is_in_the_view_at_once(
        grace_s: float) -> None:
    """The exporter publishes a late file while the metastore flips to the view: metastore
    readers saw it in the day directory a moment before, so the view has it as soon as the
    flip is made, not at a sweep seconds later (issue 32: 161 rows of one day missing for
    6.2 s through the metastore, after a kill at the commit point and the relaunch)."""
    journal, world = make_grace(1, 2) if grace_s else make(1, 2)
    in_view_at_unflip: list[bool] = []

    def locate(output: str, day: str, path: str) -> None:
        if path == VIEW:
            world.fs.files[LATE] = b"late1,late2"  # in the day dir: readers see it there
        else:  # the flip back: what the view held while readers were on it
            in_view_at_unflip.append(f"{VIEW}/{LATE.rpartition('/')[2]}" in world.fs.files)
        world.locate(output, day, path)

    commit(world.fs, journal, lambda s: None, locate, 1000, grace_s, lambda: 5_000)
    if grace_s:  # the flip is the wait's
        assert world.location == DAY
        wait_round(world, journal, locate=locate)  # type: ignore[arg-type]
        assert world.location == VIEW
        assert f"{VIEW}/{LATE.rpartition('/')[2]}" in world.fs.files
    else:  # no grace: the swap went on to its end, the view swept before it did
        assert world.location == DAY and in_view_at_unflip == [True]
    assert sorted(r for r in world.seen() if r.startswith("late")) == ["late1", "late2"]


@pytest.mark.parametrize("recovering", [False, True])
def test_a_file_published_after_the_view_is_filled_is_in_it_when_the_flip_is_made(
        recovering: bool) -> None:
    """The exporter publishes a late file after the view was filled and before the flip
    (the ``after-view`` step; in a run, or in the run that recovers one killed at its
    commit point): readers through the metastore see it in the day directory until the
    flip, so the view holds it by the time the flip is made (issue 32: no row they saw
    goes missing)."""
    journal, world = make_grace(1, 2)
    name = LATE.rpartition("/")[2]
    at_flip: list[bool] = []

    def crash(step: str) -> None:
        if step == "after-view":
            world.fs.files[LATE] = b"late1,late2"
        if recovering and step == "after-journal":
            raise Crash

    def locate(output: str, day: str, path: str) -> None:
        if path == VIEW:
            at_flip.append(f"{VIEW}/{name}" in world.fs.files)
        world.locate(output, day, path)

    if recovering:
        with pytest.raises(Crash):
            commit(world.fs, journal, crash, locate, 1000, 60.0, lambda: 5_000)
        assert recover_all(world.fs, locate, 1000, 60.0, lambda: 5_000, crash).waiting
    else:
        commit(world.fs, journal, crash, locate, 1000, 60.0, lambda: 5_000)
    assert world.location == DAY and at_flip == []  # the recovery or commit: no flip
    wait_round(world, journal, crash, locate=locate)  # type: ignore[arg-type]
    assert at_flip == [True] and world.location == VIEW


def test_a_flip_made_but_not_recorded_is_taken_back_and_the_grace_counts_from_the_next(
        ) -> None:
    journal, world = make_grace(1, 1)
    world.now = 1_000

    def crash(step: str) -> None:
        if step == "after-flip":
            raise Crash

    commit(world.fs, journal, crash, world.locate, 1000, 60.0, world.clock)
    with pytest.raises(Crash):
        wait_round(world, journal, crash)
    assert world.location == VIEW and journal.flip_record not in world.fs.files
    world.now = 50_000
    [w] = recover_all(world.fs, world.locate, 2000, 60.0, world.clock).waiting
    assert world.location == DAY  # back where a query of the day finds every row
    assert w.due_at_ms == 110_000  # later than the real flip: never sooner
    world.now = 60_000
    assert wait_round(world, journal).due_at_ms == 120_000 and world.location == VIEW


def test_the_wait_crash_point_and_the_window_of_a_swap_that_waited() -> None:
    journal, world = make_grace(2, 3)
    steps: list[str] = []
    world.now = 0
    commit(world.fs, journal, steps.append, world.locate, 1000, 60.0, world.clock)
    assert steps == ["before-journal", "after-journal", "mid-view"]
    wait_round(world, journal, steps.append)
    assert steps[3:] == ["after-view", "after-flip"]
    world.now = 60_000
    outcome = wait_round(world, journal, steps.append)
    assert outcome.due_at_ms is None and outcome.window_s > 0
    assert steps[5:] == ["mid-publish", "after-publish", "mid-delete", "after-delete",
                         "after-unflip"]


def test_a_relaunch_says_what_it_did_with_each_swap_a_killed_run_left(
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 40: a run killed a few seconds after ``compaction_start``, its journal and
    staging dir written, was relaunched, and the relaunch's summary said ``recovered 0
    forward / 0 back``: the swap it took to its wait was counted nowhere. Every journal
    and staging dir a killed run left is counted and logged, whatever was done with it."""
    from garmexport.cli.compact import counted
    from garmexport.compaction.run_state import Summary

    journal, world = make_grace(1, 2)
    world.now = 5_000

    def die(step: str) -> None:
        if step == "after-journal":
            raise Crash
    with pytest.raises(Crash):
        commit(world.fs, journal, die, world.locate, 1000, 60.0, world.clock)
    orphan = staging_path(OUT, "2026-11-02", 1)  # an uncommitted swap of another day
    world.fs.files[f"{orphan}/part-00000.parquet"] = b"x"

    with caplog.at_level("INFO", logger="garmexport.compaction.recover"):
        early = recover_all(world.fs, world.locate, 2000, 60.0, world.clock)
    assert (early.rolled_forward, early.rolled_back, len(early.waiting)) == (0, 1, 1)
    said = [(r.getMessage(), getattr(r, "garmexport_fields", {})) for r in caplog.records]
    assert ("compaction_rolled_forward", {"output": OUT, "day": DAYNAME, "generation": 3,
                                          "finished": False, "due_in_s": 60.0}) in said, said
    assert ("compaction_rolled_back", {"output": OUT, "day": "2026-11-02",
                                       "staging": "g000001"}) in said, said

    summary = Summary(rolled_forward=1, rolled_forward_waited=1)  # the Spark run's count
    line = counted(summary, early).line()
    assert "recovered 1 forward (1 after waiting out the grace) / 1 back" in line, line
    assert "recovered 0 forward / 0 back" in Summary().line()
