"""What one compaction run shares and reports: its context and its summary.

:class:`RunContext` is what every day of a run and its grace wait (:mod:`.grace`) share;
:class:`Summary` is what the run did, printed, logged and reported (:mod:`.report`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from garmexport.compaction.lease import Lease
from garmexport.compaction.recover import Clock, Locator, Waiting, wall_ms

#: Summary field -> its name in a dry run's summary (what would be done)
_PLANNED_NAMES = {"days_compacted": "days_to_compact", "files_in": "files_to_compact",
                  "files_out": "files_planned", "bytes_in": "bytes_to_compact",
                  "rows": "rows_to_compact"}


@dataclass
class Summary:
    days_compacted: int = 0
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    rows: int = 0
    files_left: int = 0
    #: swaps a killed run left committed (a journal), taken forward by this run: finished
    #: at its start, or (``rolled_forward_waited`` of them) flipped and finished by its wait
    rolled_forward: int = 0
    rolled_forward_waited: int = 0
    #: uncommitted swaps a killed run left (a staging dir, no journal), deleted
    rolled_back: int = 0
    views_deleted: int = 0
    complete_written: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: longest window of one day's swap in which a path reader could see an output and some
    #: of its inputs at once: first output published into the day dir to last input deleted
    #: (metastore readers are on the view meanwhile)
    max_swap_s: float = 0.0
    #: swaps that waited out the grace in this run, and how long the run waited for them
    swaps_waited: int = 0
    waited_s: float = 0.0
    #: a dry run's days not planned because a swap of theirs is under way (another run's)
    #: or was left by a killed run: the next real run recovers them first
    swaps_pending: int = 0

    def as_dict(self, dry_run: bool = False) -> dict[str, Any]:
        """The fields by name; a dry run's under names that say they are planned, not
        done, and without what only a real run produces (output bytes, markers)."""
        doc = dict(vars(self))
        if not dry_run:  # a real run recovers them: rolled_forward, rolled_back
            del doc["swaps_pending"]
        if dry_run:
            for done, planned in _PLANNED_NAMES.items():
                doc[planned] = doc.pop(done)
            for only_real in ("bytes_out", "complete_written"):
                del doc[only_real]
        return doc

    def line(self, dry_run: bool = False) -> str:
        mb = 1024 * 1024
        if dry_run:  # what the plan holds: nothing was written, so no output sizes
            return (f"compaction dry run: {self.days_compacted} days planned, files "
                    f"{self.files_in} -> {self.files_out}, {self.bytes_in / mb:.1f} MiB, "
                    f"{self.rows} rows, {self.files_left} files left, "
                    f"{self.swaps_pending} days not planned for an unfinished swap, "
                    f"{len(self.problems)} problems, {self.seconds:.1f} s; nothing changed")
        return (f"compaction: {self.days_compacted} days, files {self.files_in} -> "
                f"{self.files_out}, {self.bytes_in / mb:.1f} MiB -> {self.bytes_out / mb:.1f} "
                f"MiB, {self.rows} rows, {self.files_left} files left, recovered "
                f"{self.rolled_forward} forward{self._waited()} / {self.rolled_back} back, "
                f"{len(self.problems)} problems, {self.seconds:.1f} s; longest swap window "
                f"{self.max_swap_s:.3f} s; waited {self.waited_s:.0f} s for the grace of "
                f"{self.swaps_waited} swaps")


    def _waited(self) -> str:
        n = self.rolled_forward_waited
        return f" ({n} after waiting out the grace)" if n else ""


@dataclass(frozen=True)
class RunContext:
    """What every day of one run shares: the lease, the metastore flips, the time, and the
    swaps waiting out their grace."""

    lease: Lease | None  # None in a dry run, which holds none
    locator: Locator | None
    now_ms: int
    crash: Callable[[str], None]
    grace_s: float = 0.0
    clock: Clock = wall_ms
    waiting: list[Waiting] = field(default_factory=list)
