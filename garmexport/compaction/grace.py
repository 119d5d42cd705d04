"""Waiting out the grace of swaps flipped to their view, then finishing them.

Why (DESIGN.md 6): a query may have listed the day directory just before the flip; the day
directory must not change until no such query can still be reading, ``grace_s`` after the
flip. Meanwhile the exporter may publish late files into the day: each round copies them
into the view (:func:`.recover.advance` sweeps a swap that is not due), so metastore
readers get them within a round. The first round makes the flips (the commit and the
recovery leave every swap that is not due on the day directory): a partition is on a view
only while this loop sweeps it. A swap that is due is finished in the same call, and its
day's ``_COMPLETE`` written.

Invariants: the root's lease is checked before every round (a run that lost it must not
touch a day directory); the waits are by the wall clock the flips were recorded with.
"""

from __future__ import annotations

import logging
import time

from garmexport.compaction import complete
from garmexport.compaction.fs import FileOps
from garmexport.compaction.recover import Waiting, advance
from garmexport.compaction.run_state import RunContext, Summary
from garmexport.observe.logs import log_event

log = logging.getLogger(__name__)


def wait_out(fs: FileOps, ctx: RunContext, summary: Summary, lateness_s: float,
             sweep_every_s: float) -> None:
    """Flip every swap in ``ctx.waiting`` to its view (those not flipped yet), sweep the
    view every ``sweep_every_s`` until its grace has passed, then finish it and mark its
    day, counting both in ``summary`` (and the time waited, added to ``waited_s``);
    progress is logged every minute. Empties ``ctx.waiting``."""
    waiting = ctx.waiting
    if not waiting:
        return
    started, said, swept = time.monotonic(), -1, False
    log_event(log, "compaction_grace_wait", swaps=len(waiting), grace_s=ctx.grace_s,
              longest_s=round(max(0, max(w.due_at_ms for w in waiting) - ctx.clock())
                              / 1000, 1))
    while waiting:
        ctx.lease.check()
        for w in list(waiting):
            outcome = advance(fs, w.journal, ctx.crash, ctx.locator, ctx.now_ms,
                              ctx.grace_s, ctx.clock, flip=True)
            if outcome.due_at_ms is not None:  # flipped: due at the flip plus the grace
                waiting[waiting.index(w)] = Waiting(w.journal, outcome.due_at_ms)
                continue
            waiting.remove(w)
            j = w.journal
            summary.swaps_waited += 1
            summary.max_swap_s = max(summary.max_swap_s, outcome.window_s)
            log_event(log, "compaction_swap_finished", output=j.output, day=j.day,
                      generation=j.generation, swap_s=round(outcome.window_s, 3))
            summary.complete_written += complete.mark_if_complete(
                fs, j.output, j.day, ctx.now_ms, lateness_s, ctx.crash)
        if not swept:
            swept = True
            ctx.crash("waiting")
        if not waiting:
            break
        waited = time.monotonic() - started
        if int(waited // 60) > said:
            said = int(waited // 60)
            log_event(log, "compaction_grace_waiting", swaps=len(waiting),
                      waited_s=round(waited),
                      left_s=round(max(0, min(w.due_at_ms for w in waiting) - ctx.clock())
                                   / 1000, 1))
        next_due_s = (min(w.due_at_ms for w in waiting) - ctx.clock()) / 1000
        time.sleep(max(0.05, min(sweep_every_s, next_due_s)))
    summary.waited_s += time.monotonic() - started
