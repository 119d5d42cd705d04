"""One compaction per root: the lease waits for a live holder, takes over an expired one,
lets exactly one of two racing runs win, and tells a stalled holder it lost."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

from garmexport.compaction.fs import LocalFs
from garmexport.compaction.lease import Holder, Lease, blocked_by, current, lease_name, parse_lease
from garmexport.compaction.names import LEASE_DIR
from garmexport.errors import LeaseLost


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms

    def sleep(self, s: float) -> None:
        self.ms += int(s * 1000)


def lease(fs: LocalFs, clock: Clock, owner: str) -> Lease:
    return Lease(fs, owner, lease_s=20, renew_s=5, clock_ms=clock, sleep=clock.sleep)


def test_the_holder_is_the_highest_unexpired_lease() -> None:
    assert current({}) is None
    h = current({1: ("a", 10), 3: ("b", 50)})
    assert h == Holder(3, "b", 50)
    assert blocked_by(h, "c", 49) == "b"
    assert blocked_by(h, "c", 50) is None  # expired
    assert blocked_by(h, "b", 10) is None  # its own
    assert blocked_by(None, "c", 0) is None


def test_a_second_run_waits_for_a_live_holder_then_gives_up(tmp_path) -> None:
    fs, clock = LocalFs(str(tmp_path)), Clock()
    first = lease(fs, clock, "first")
    first.acquire(0)
    second = lease(fs, clock, "second")
    renewals = []

    def sleep(s: float) -> None:  # the first run renews while the second waits
        clock.sleep(s)
        first.renew()
        renewals.append(clock.ms)

    second._sleep = sleep
    with pytest.raises(LeaseLost, match="first"):
        second.acquire(60)
    assert len(renewals) >= 59
    first.check()
    renewed_to = first.k
    assert renewed_to == 1 + len(renewals)  # each renewal is the next number
    first.release()  # one more number, already expired
    second.acquire(0)
    second.check()
    # k only grows: a stalled holder of an older k can never take a newer lease for its own
    assert [e.name for e in fs.list(LEASE_DIR) if not e.name.startswith(".")] == [
        lease_name(renewed_to + 2)]


class NoReplace(LocalFs):
    """A store where replacing a file is a delete then a rename (HDFS, object stores):
    writing over an existing lease file fails the test, as that instant without the file
    would let another run take the lease."""

    def write(self, path: str, data: bytes) -> None:
        name = path.rpartition("/")[2]
        if parse_lease(name) is not None and any(e.name == name for e in self.list(LEASE_DIR)):
            raise AssertionError(f"lease file {name} replaced")
        super().write(path, data)


def test_renewal_and_release_never_replace_a_lease_file(tmp_path) -> None:
    fs, clock = NoReplace(str(tmp_path)), Clock()
    held = lease(fs, clock, "held")
    held.acquire(0)
    for _ in range(3):
        clock.ms += 5_000
        held.renew()
    held.check()
    held.release()
    lease(fs, clock, "next").acquire(0)


def test_a_renewal_that_loses_the_race_for_the_next_number_loses_the_lease(tmp_path) -> None:
    fs, clock = LocalFs(str(tmp_path)), Clock()
    late = lease(fs, clock, "late")
    late.acquire(0)
    clock.ms += 21_000  # expired: another run creates the next number
    lease(fs, clock, "other").acquire(0)
    late._still_mine = lambda: True  # type: ignore[method-assign] # it read just before
    late.renew()
    with pytest.raises(LeaseLost, match="created by another run"):
        late.check()


def test_a_killed_holder_is_taken_over_once_its_lease_expires(tmp_path) -> None:
    fs, clock = LocalFs(str(tmp_path)), Clock()
    lease(fs, clock, "killed").acquire(0)  # never renewed, never released
    retry = lease(fs, clock, "retry")
    started = clock.ms
    retry.acquire(3600)
    assert 20_000 <= clock.ms - started <= 21_000
    retry.check()


def test_a_stalled_holder_learns_it_lost_the_lease_and_must_not_commit(tmp_path) -> None:
    fs, clock = LocalFs(str(tmp_path)), Clock()
    stalled = lease(fs, clock, "stalled")
    stalled.acquire(0)
    clock.ms += 21_000
    other = lease(fs, clock, "other")
    other.acquire(0)
    other.release()  # even once the newer run is done, the stalled one stays out
    stalled.renew()
    with pytest.raises(LeaseLost, match="taken over by other"):
        stalled.check()


def test_of_two_runs_racing_for_the_lease_exactly_one_holds_it(tmp_path) -> None:
    fs = LocalFs(str(tmp_path))
    leases = [Lease(fs, f"run{i}", lease_s=600) for i in range(8)]
    barrier = threading.Barrier(len(leases))
    won: list[str] = []

    def race(lease: Lease) -> None:
        barrier.wait()
        try:
            lease.acquire(0)
            won.append(lease.owner)
        except LeaseLost:
            pass

    threads = [threading.Thread(target=race, args=(x,)) for x in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1, won


def test_hold_renews_in_the_background_and_release_frees_the_root(tmp_path) -> None:
    fs = LocalFs(str(tmp_path))
    with Lease(fs, "a", lease_s=0.6, renew_s=0.1).hold(0) as held:
        threading.Event().wait(1.5)  # well past one lease: renewals kept it
        held.check()
        with pytest.raises(LeaseLost):
            Lease(fs, "b").acquire(0)
    Lease(fs, "b").acquire(0)



def _churn(root: str, stop) -> None:  # noqa: ANN001 - a multiprocessing Event
    """Another run's lease traffic: a temp file written, linked to a lease name, unlinked."""
    fs, k = LocalFs(root), 0
    while not stop.is_set():
        k += 1
        fs.write(f"{LEASE_DIR}/.other.tmp", b"{}")
        fs.rename(f"{LEASE_DIR}/.other.tmp", f"{LEASE_DIR}/{lease_name(k)}")
        fs.delete(f"{LEASE_DIR}/{lease_name(k)}")


def test_a_listing_while_another_run_writes_and_renames_its_lease_files_never_fails(
        tmp_path) -> None:
    """Two ``compact`` runs started at once: one lists ``_compaction/_lease`` while the other
    (another process) writes a temp file there, links it to a lease name and unlinks the
    temp. An entry that vanishes between the directory read and its stat was not there:
    the listing leaves it out instead of raising FileNotFoundError (which made the second
    of two simultaneous runs exit 1 at its start)."""
    fs = LocalFs(str(tmp_path))
    fs.write(f"{LEASE_DIR}/{lease_name(0)}", b"{}")
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    other = ctx.Process(target=_churn, args=(str(tmp_path), stop))
    other.start()
    try:
        listed, deadline = 0, time.monotonic() + 2.0
        while time.monotonic() < deadline:
            names = {entry.name for entry in fs.list(LEASE_DIR)}
            assert lease_name(0) in names  # what stays is always listed
            listed += 1
    finally:
        stop.set()
        other.join(10)
    assert other.exitcode == 0 and listed > 100
