"""CPU seconds and peak RSS of a process tree, read from /proc by a sampling thread.

A benchmark starts a program as its own process (in its own process group) and wraps it in
:class:`TreeSampler`; the sampler polls ``/proc`` every ``interval_s`` and follows children
as they appear (thespian or multiprocessing may fork workers).

Invariants and limits:

- CPU seconds are user + system time of every process seen in the tree, each taken at its
  last sample (a child that lives less than one interval is missed; one that exits between
  samples loses at most one interval of CPU). The root's own figure also includes its
  waited-for children (``cutime``/``cstime``), so reaped children are not lost.
- Peak RSS is the maximum, over samples, of the sum of resident set sizes of the processes
  alive at that sample (bytes). Shared pages are counted once per process, so it errs high
  for a tree of several processes (each maps the same libraries: pyarrow, librdkafka...).
- Peak PSS is the same maximum over the sum of proportional set sizes
  (``/proc/PID/smaps_rollup``): a page shared by k processes counts 1/k in each, so the sum
  counts every page once, as a memory cgroup (the limit Mesos enforces) does. For one
  process the two differ only by the pages it shares with processes outside the tree.
- Linux only; a process that vanished between listing and reading is skipped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class TreeUsage:
    """What a sampler measured: CPU seconds (user+sys) and peak RSS bytes of the tree."""

    cpu_s: float
    peak_rss_bytes: int
    samples: int
    peak_pss_bytes: int = 0


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own cpu s, cpu s of waited-for children) of ``pid``, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may contain spaces
    ppid = int(fields[1])
    own = (int(fields[11]) + int(fields[12])) / _TICKS
    children = (int(fields[13]) + int(fields[14])) / _TICKS
    return ppid, own, children


def _rss(pid: int) -> int:
    """Resident bytes of ``pid`` (0 if gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _pss(pid: int) -> int:
    """Proportional set size of ``pid`` in bytes (0 if gone or not readable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def tree_pids(root: int) -> list[int]:
    """``root`` and all its live descendants (one scan of /proc)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                parents.setdefault(st[0], []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


class TreeSampler:
    """Samples the trees of ``roots`` (summed, as one) in a thread until :meth:`stop`;
    usable as a context manager."""

    def __init__(self, *roots: int, interval_s: float = 0.2) -> None:
        self.roots, self.interval_s = roots, interval_s
        self._cpu: dict[int, float] = {}
        self._reaped_cpu: dict[int, float] = {}  # root -> cpu of its waited-for children
        self._peak = 0
        self._peak_pss = 0
        self._samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sample(self) -> None:
        """Take one sample now (also called by the thread)."""
        total = pss = 0
        for pid in {p for root in self.roots for p in tree_pids(root)}:
            st = _stat(pid)
            if st is None:
                continue
            self._cpu[pid] = st[1]
            if pid in self.roots:
                self._reaped_cpu[pid] = st[2]
            total += _rss(pid)
            pss += _pss(pid)
        self._peak = max(self._peak, total)
        self._peak_pss = max(self._peak_pss, pss)
        self._samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def stop(self) -> TreeUsage:
        """Stop sampling (one last sample first, while the tree may still be alive)."""
        if not self._stop.is_set():
            self.sample()
            self._stop.set()
            if self._thread.is_alive():
                self._thread.join()
        return self.usage()

    def usage(self) -> TreeUsage:
        # Reaped children are in the root's cutime; counting both their own last sample and
        # cutime would double them, so take the larger of the two views for those.
        # (Grandchildren are attributed to the roots' trees together: good enough here.)
        descendants = sum(v for pid, v in self._cpu.items() if pid not in self.roots)
        own = sum(self._cpu.get(root, 0.0) for root in self.roots)
        cpu = own + max(descendants, sum(self._reaped_cpu.values()))
        return TreeUsage(cpu_s=cpu, peak_rss_bytes=self._peak, samples=self._samples,
                         peak_pss_bytes=self._peak_pss)


def rss_now(root: int) -> int:
    """Current RSS bytes of the tree of ``root`` (one sample)."""
    return sum(_rss(pid) for pid in tree_pids(root))


def cpu_now(root: int) -> float:
    """Current CPU seconds (user+sys) of the live tree of ``root``, plus its reaped children."""
    total = 0.0
    for pid in tree_pids(root):
        st = _stat(pid)
        if st is not None:
            total += st[1] + (st[2] if pid == root else 0.0)
    return total


def spawn(command: list[str], log_path: str, env: dict[str, str] | None = None,
          cwd: str | None = None) -> subprocess.Popen:
    """Start ``command`` in its own session (so :func:`kill_tree` reaches all it forks),
    stdout and stderr to ``log_path``."""
    with open(log_path, "wb") as log:  # a repeated run must not read the last run's lines
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)


def wait_cpu(proc: subprocess.Popen, timeout_s: float) -> float | None:
    """Wait for ``proc`` to exit; its CPU seconds (own + reaped children) from wait4.

    Returns None (and leaves the process running) if it did not exit within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        time.sleep(0.02)
    return None


def kill_tree(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL it after ``grace_s``; reap ``proc``.
    Safe to call on a process that already exited."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if proc.returncode is not None:
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired, ChildProcessError):
            proc.wait(timeout=wait_s)
    # Stragglers of the group (children that outlived the leader) are killed too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
