"""glibc's malloc: the operator's arena setting wins, and a trim hands freed pages back."""

from __future__ import annotations

import ctypes
import time

import pytest

from garmexport.process import malloc_tuning
from garmexport.process.malloc_tuning import start_trimming, trim_once, wanted

pytestmark = pytest.mark.skipif(malloc_tuning._libc() is None, reason="glibc only")


def test_an_operator_who_tunes_malloc_is_left_alone() -> None:
    assert wanted({}) and wanted({"GLIBC_TUNABLES": "glibc.rtld.nns=2"})
    assert not wanted({"MALLOC_ARENA_MAX": "8"})
    assert not wanted({"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"})
    assert not wanted({"GLIBC_TUNABLES": "glibc.elision.enable=1:glibc.malloc.trim_threshold=0"})


_LIBC = ctypes.CDLL(None)
_LIBC.malloc.restype = ctypes.c_void_p
_LIBC.malloc.argtypes = [ctypes.c_size_t]
_LIBC.free.argtypes = [ctypes.c_void_p]


def _anon_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon")


def _freed_but_kept(chunks: int = 800, size: int = 100_000) -> int:
    """Touch chunks of 100 kB (below glibc's mmap threshold: they come from the heap), then
    free all but one allocated after them, which keeps the heap's top from shrinking by
    itself: the freed pages stay in the process until a trim. Returns the kept one."""
    blocks = [_LIBC.malloc(size) for _ in range(chunks)]
    for b in blocks:
        ctypes.memset(b, 1, size)
    keep = _LIBC.malloc(size)
    for b in blocks:
        _LIBC.free(b)
    return keep


def test_a_trim_hands_the_freed_pages_back() -> None:
    keep = _freed_but_kept()
    before = _anon_mb()
    trim_once()
    assert before - _anon_mb() > 40  # of the 80 MB freed
    _LIBC.free(keep)


def test_the_trimming_thread_hands_them_back_by_itself() -> None:
    keep = _freed_but_kept()
    before = _anon_mb()
    thread = start_trimming(0.05)
    assert thread is not None and thread.daemon and thread.name == "malloc-trim"
    deadline = time.monotonic() + 10
    while before - _anon_mb() <= 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert before - _anon_mb() > 40
    _LIBC.free(keep)
