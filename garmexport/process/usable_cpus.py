"""How many CPUs this process may use: its affinity, capped by its cgroup's CPU quota.

Mesos and Docker limit a task's CPU with a CFS quota (``cpus: 2`` is 200 ms of CPU every
100 ms), not with its affinity: ``os.sched_getaffinity`` shows every core of the host
there. So the quota is read too, cgroup v2 (``cpu.max``: ``"200000 100000"`` or ``"max
100000"``) first, then v1 (``cpu.cfs_quota_us`` and ``cpu.cfs_period_us``, -1 for none),
and a fractional quota rounds up (1.5 CPUs may keep 2 threads busy part of the time).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

V2 = Path("/sys/fs/cgroup/cpu.max")
V1 = Path("/sys/fs/cgroup/cpu")


def quota_cpus(quota_us: int, period_us: int) -> int | None:
    """CPUs a CFS quota allows (rounded up), or None when there is no quota."""
    if quota_us <= 0 or period_us <= 0:
        return None
    return max(1, math.ceil(quota_us / period_us))


def parse_cpu_max(text: str) -> int | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` line; None for ``max`` or an odd line."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        return quota_cpus(int(parts[0]), int(parts[1]))
    except ValueError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_cpus(v2: Path = V2, v1: Path = V1) -> int | None:
    """CPUs the process's cgroup quota allows, or None (no quota, or none readable)."""
    text = _read(v2)
    if text is not None:
        return parse_cpu_max(text)
    quota, period = _read(v1 / "cpu.cfs_quota_us"), _read(v1 / "cpu.cfs_period_us")
    if quota is None or period is None:
        return None
    return parse_cpu_max(f"{quota.strip()} {period.strip()}")  # -1: no quota, as "max"


def usable_cpus() -> int:
    """The CPUs this process may use (at least 1)."""
    try:
        mine = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        mine = os.cpu_count() or 1
    quota = cgroup_cpus()
    return max(1, min(mine, quota) if quota is not None else mine)
