"""The one order of steps of a run that swaps days in: compaction's and repair's.

A compaction and a repair differ only in what they swap in (compacted files of a day's
small files; a day's files less some rows): both are runs of this driver, so a crash of
either leaves what a crash of the other would, and the next run of either finishes it.

Steps, under the root's lease (:mod:`.lease`: one run at a time; a killed run's lease
expires within ``lease_s`` for its retry)::

    1 recover  finish or undo every swap a killed run left (:func:`.recover.recover_all`),
               so that the day directories hold each row once before anything is read;
               a swap whose grace is not over waits for step 5 (its day is ``held``)
    2 sweep    delete the metastore views retired longer ago than the grace
               (:func:`.retired.sweep`)
    3 work     the caller's: read, plan, stage, and per staged day :meth:`Swaps.commit`
               (the lease checked first: a run that lost it must not commit) and
               :meth:`Swaps.mark` (the day's ``_COMPLETE``, unless its swap waits)
    4 wait     flip every waiting swap to its view, sweep the exporter's new files into
               it until its grace is over, finish it and mark its day (:func:`.grace.wait_out`)

What a caller decides: what it swaps (step 3), and whether it waits out the recovered
swaps before it reads (:meth:`Swaps.wait_out` in step 3): compaction skips their days
instead (it plans per day, and the other days' compaction can take hours); repair plans
from one read of the whole output, in which such a day still shows the rows its swap
removes, so it waits first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from garmexport.compaction import complete, retired
from garmexport.compaction.fs import FileOps
from garmexport.compaction.grace import wait_out
from garmexport.compaction.lease import LEASE_S, RENEW_S, Lease
from garmexport.compaction.recover import (Clock, Locator, Outcome, Recovered, Waiting,
                                           commit, recover_all, wall_ms)
from garmexport.compaction.run_state import RunContext, Summary
from garmexport.compaction.swap import Journal, crash_point

T = TypeVar("T")


@dataclass(frozen=True)
class DriveOptions:
    lateness_s: float
    #: how long the files a metastore query may have listed are kept after the metastore
    #: left them (a swap's grace when there is a metastore; retired views always)
    grace_s: float
    #: how often a waiting swap's view takes the exporter's new files
    sweep_every_s: float
    #: how long a run waits for another run of the root to end
    lease_wait_s: float
    #: how long the lease outlives the run's last renewal (renewed every quarter of it,
    #: at most every RENEW_S)
    lease_s: float = LEASE_S


class Swaps:
    """What the work of a run (step 3) swaps through: the run's context and summary."""

    def __init__(self, fs: FileOps, ctx: RunContext, summary: Summary, opts: DriveOptions,
                 recovered: Recovered) -> None:
        self.fs, self.ctx, self.summary, self._opts = fs, ctx, summary, opts
        #: what step 1 did with what killed runs left
        self.recovered = recovered

    @property
    def held(self) -> set[tuple[str, str]]:
        """(output, day) of every swap waiting out its grace: no other swap of that day
        until it is over."""
        return {(w.journal.output, w.journal.day) for w in self.ctx.waiting}

    def commit(self, journal: Journal) -> Outcome:
        """Check the lease, commit the staged swap ``journal`` and take it as far as it may
        go now; one whose grace is not over waits for step 4."""
        assert self.ctx.lease is not None
        self.ctx.lease.check()  # a run that lost the lease must not commit
        c = self.ctx
        outcome = commit(self.fs, journal, c.crash, c.locator, c.now_ms, c.grace_s, c.clock)
        self.summary.max_swap_s = max(self.summary.max_swap_s, outcome.window_s)
        if outcome.due_at_ms is not None:
            c.waiting.append(Waiting(journal, outcome.due_at_ms))
        return outcome

    def mark(self, output: str, day: str) -> None:
        """Write the day's ``_COMPLETE`` if it is fully compacted and no swap of it waits."""
        if (output, day) not in self.held:
            self.summary.complete_written += complete.mark_if_complete(
                self.fs, output, day, self.ctx.now_ms, self._opts.lateness_s, self.ctx.crash)

    def wait_out(self) -> None:
        """Step 4 now: wait out (and finish) every swap waiting so far."""
        wait_out(self.fs, self.ctx, self.summary, self._opts.lateness_s,
                 self._opts.sweep_every_s)


def drive(fs: FileOps, locator: Locator | None, opts: DriveOptions,
          work: Callable[[Swaps], T], now_ms: int | None = None,
          crash: Callable[[str], None] = crash_point,
          clock: Clock = wall_ms) -> tuple[T, Summary]:
    """Run steps 1-4 (the module docstring) with ``work`` as step 3; its result and the
    run's summary. ``locator``: the metastore flips (None: plain swaps, no grace).
    ``now_ms``: the run's time (markers, retirements); None: ``clock()`` once the lease is
    held. ``crash``: the tests' hooks at the swap steps."""
    summary = Summary()
    grace_s = opts.grace_s if locator is not None else 0.0
    with Lease(fs, lease_s=opts.lease_s, renew_s=min(RENEW_S, opts.lease_s / 4)
               ).hold(opts.lease_wait_s) as lease:
        now = clock() if now_ms is None else now_ms
        ctx = RunContext(lease, locator, now, crash, grace_s, clock)
        recovered = recover_all(fs, locator, now, grace_s, clock, crash)
        summary.rolled_forward = recovered.rolled_forward + len(recovered.waiting)
        summary.rolled_forward_waited = len(recovered.waiting)
        summary.rolled_back = recovered.rolled_back
        ctx.waiting.extend(recovered.waiting)
        summary.views_deleted = retired.sweep(fs, now, opts.grace_s)
        swaps = Swaps(fs, ctx, summary, opts, recovered)
        result = work(swaps)
        swaps.wait_out()
    return result, summary
