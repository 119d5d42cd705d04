"""One compaction of an output root at a time: a renewed lease under ``_compaction/_lease/``.

Why: every swap step is idempotent, but two runs at once are not safe. Recovery deletes a
staging dir that has no journal (it takes it for a crashed run's, and it may be a live
run's Spark output), and two runs planning one day both write generation N. The Metronome
job allows overlapping runs (its only concurrency policy), an operator may start one by
hand, and a retried run may start while a stalled one still runs.

How, with only "create if absent" (a rename that never overwrites, as HDFS and local
disks give it): lease files ``<k>.json`` (k zero-padded) hold ``{"owner", "expires_at_ms"}``.
The lease belongs to the owner of the highest k while its expiry is ahead.

- take: list; if the highest lease is live and someone else's, wait (poll); else create
  k+1 -- of several runs racing for k+1 exactly one rename succeeds, the others re-list;
- renew every ``renew_s``: if a higher k exists the lease was taken over (this run stalled
  past its expiry) and :meth:`Lease.check` raises :class:`LeaseLost` before the next
  commit; else the holder creates k+1 with a new expiry ``lease_s`` ahead (the same
  create-if-absent rename), then deletes k. A lease file is never replaced: on HDFS and
  object stores a replacement is a delete and a rename, and for that instant the lease
  would be missing and another run could take it. If the rename loses (another run
  created k+1 after this one's lease expired), the lease is lost;
- release: create k+1 already expired, the same way. The highest file is never deleted,
  so k only grows and a stalled holder can never mistake a newer lease for its own; the
  next taker deletes the older files. A killed run's file expires ``lease_s`` after its
  last renewal, so a retried run starts recovery that much later.

Time: wall clock ms compared across hosts (as markers are): clocks must agree to well
under ``lease_s``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from garmexport.compaction.fs import FileOps
from garmexport.compaction.names import LEASE_DIR
from garmexport.errors import LeaseLost, StorageError
from garmexport.observe.logs import log_event

log = logging.getLogger(__name__)

LEASE_S = 20.0
RENEW_S = 5.0
POLL_S = 1.0


@dataclass(frozen=True)
class Holder:
    k: int
    owner: str
    expires_at_ms: int


def lease_name(k: int) -> str:
    return f"{k:010d}.json"


def parse_lease(name: str) -> int | None:
    stem, dot, ext = name.partition(".")
    return int(stem) if dot and ext == "json" and len(stem) == 10 and stem.isdigit() else None


def current(leases: Mapping[int, tuple[str, int]]) -> Holder | None:
    """The highest lease (k -> (owner, expiry)), or None when there is none (pure)."""
    if not leases:
        return None
    k = max(leases)
    return Holder(k, *leases[k])


def blocked_by(holder: Holder | None, owner: str, now_ms: int) -> str | None:
    """Who keeps ``owner`` from taking the lease at ``now_ms`` (None: nobody; pure)."""
    if holder is None or holder.owner == owner or holder.expires_at_ms <= now_ms:
        return None
    return holder.owner


class Lease:
    """This run's claim on the root (see the module docstring)."""

    def __init__(self, fs: FileOps, owner: str = "", lease_s: float = LEASE_S,
                 renew_s: float = RENEW_S, clock_ms: Callable[[], int] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._fs, self.owner = fs, owner or uuid.uuid4().hex
        self._lease_s, self._renew_s, self._sleep = lease_s, renew_s, sleep
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.k: int | None = None
        self._lost = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> dict[int, tuple[str, int]]:
        leases: dict[int, tuple[str, int]] = {}
        for e in self._fs.list(LEASE_DIR):
            k = parse_lease(e.name)
            if k is None or e.is_dir:
                continue
            try:
                doc = json.loads(self._fs.read(f"{LEASE_DIR}/{e.name}"))
                leases[k] = (str(doc["owner"]), int(doc["expires_at_ms"]))
            except (OSError, ValueError, KeyError):
                leases[k] = ("?", self._clock_ms() + int(self._lease_s * 1000))  # being written
        return leases

    def _doc(self, expires_at_ms: int | None = None) -> bytes:
        if expires_at_ms is None:
            expires_at_ms = self._clock_ms() + int(self._lease_s * 1000)
        return json.dumps({"owner": self.owner, "expires_at_ms": expires_at_ms}).encode()

    def _still_mine(self) -> bool:
        holder = current(self._read())
        if holder is not None and (holder.k, holder.owner) == (self.k, self.owner):
            return True
        self._lost = f"lease {self.k} was taken over by {holder.owner if holder else None}"
        return False

    def acquire(self, wait_s: float) -> None:
        """Take the lease, waiting up to ``wait_s`` for a live holder; LeaseLost if it
        stays taken."""
        deadline = self._clock_ms() + wait_s * 1000
        said = ""
        while True:
            holder = current(self._read())
            other = blocked_by(holder, self.owner, self._clock_ms())
            if other is None:
                k = 1 + (holder.k if holder else 0)
                if not self._create(k, self._doc()):
                    continue  # another run took k first: look again
                for old in self._read():
                    if old < k:
                        self._fs.delete(f"{LEASE_DIR}/{lease_name(old)}")
                log_event(log, "compaction_lease_taken", owner=self.owner, k=k,
                          after_expiry_of=holder.owner if holder else None)
                return
            if self._clock_ms() >= deadline:
                raise LeaseLost(f"another compaction ({other}) holds {LEASE_DIR} of this "
                                f"root; gave up after {wait_s:.0f} s")
            if other != said:
                said = other
                log_event(log, "compaction_lease_wait", owner=self.owner, holder=other)
            self._sleep(POLL_S)

    def renew(self) -> None:
        """Push the expiry ahead, unless the lease was taken over (then :meth:`check`
        raises)."""
        if self.k is None or self._lost:
            return
        if not self._still_mine() or not self._advance(self._doc()):
            log_event(log, "compaction_lease_lost", level=logging.ERROR, owner=self.owner,
                      detail=self._lost)

    def check(self) -> None:
        """Raise LeaseLost if the lease is no longer this run's."""
        if self.k is None or self._lost:
            raise LeaseLost(self._lost or "the compaction lease is not held")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._renew_s + 5)
        if self.k is not None and not self._lost and self._still_mine():
            self._advance(self._doc(expires_at_ms=0))
        self.k = None

    def _create(self, k: int, doc: bytes) -> bool:
        """Create lease ``k`` with ``doc`` unless it exists (then False); on success it is
        this run's lease."""
        tmp = f"{LEASE_DIR}/.{self.owner}.tmp"
        self._fs.write(tmp, doc)
        try:
            self._fs.rename(tmp, f"{LEASE_DIR}/{lease_name(k)}")
        except StorageError:
            self._fs.delete(tmp)
            return False
        self.k = k
        return True

    def _advance(self, doc: bytes) -> bool:
        """Move the own lease k to k+1 with ``doc``, then delete k; False (the lease is
        lost) if another run created k+1 first."""
        held = self.k
        assert held is not None
        if not self._create(held + 1, doc):
            self._lost = f"lease {held + 1} was created by another run"
            return False
        self._fs.delete(f"{LEASE_DIR}/{lease_name(held)}")
        return True

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._renew_s):
            try:
                self.renew()
            except Exception as exc:  # noqa: BLE001 - a failed renewal may be retried
                log_event(log, "compaction_lease_renew_failed", level=logging.WARNING,
                          error=str(exc))

    def hold(self, wait_s: float) -> Lease:
        """Acquire, then renew in a daemon thread until :meth:`release`."""
        self.acquire(wait_s)
        self._thread = threading.Thread(target=self._renew_loop, name="compaction-lease",
                                        daemon=True)
        self._thread.start()
        return self

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
