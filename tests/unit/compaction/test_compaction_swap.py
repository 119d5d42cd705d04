"""The compaction swap survives a crash after any action, also during its own recovery."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garmexport.compaction.fs import LocalFs
from garmexport.compaction.names import journal_path, staging_path
from garmexport.compaction.recover import commit_swap, finish, recover_all
from garmexport.compaction.swap import (Delete, DeleteTree, Journal, Move, Rename, WriteFile,
                                        roll_forward)
from garmexport.compaction.swap_apply import apply
from garmexport.errors import ProtocolViolation
from garmexport.storage.base import Entry

DAY = "fs/day=2026-11-01"


class MemFs:
    """FileOps over a dict, enough to replay the swap (directories are implied by paths)."""

    uri = "mem://"

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)

    def list(self, path: str) -> list[Entry]:
        prefix = path.rstrip("/") + "/" if path else ""
        names: dict[str, bool] = {}
        for p in self.files:
            if p.startswith(prefix):
                head, sep, _ = p[len(prefix):].partition("/")
                names[head] = names.get(head, False) or bool(sep)
        return [Entry(n, d, 0 if d else len(self.files[prefix + n])) for n, d in names.items()]

    def read(self, path: str) -> bytes:
        return self.files[path]

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:
        return self.files[path][-nbytes:], len(self.files[path])

    def write(self, path: str, data: bytes) -> None:
        self.files[path] = data

    def rename(self, src: str, dst: str) -> None:
        assert dst not in self.files, "rename must never overwrite"
        self.files[dst] = self.files.pop(src)

    def delete(self, path: str) -> None:
        self.files.pop(path, None)

    def delete_tree(self, path: str) -> None:
        for p in [p for p in self.files if p.startswith(path + "/")]:
            del self.files[p]


class Crash(Exception):
    pass


def make_journal(n_out: int, n_in: int) -> tuple[Journal, dict[str, bytes]]:
    """A committed-to-be swap of n_in inputs into n_out outputs, and the files before it."""
    staging = staging_path("fs", "2026-11-01", 3)
    moves = tuple(Move(f"{staging}/part-{k:05d}-x.parquet",
                       f"{DAY}/local+t+c000003+{k:05d}.parquet",
                       f"{DAY}/_local+t+c000003+{k:05d}.json", f'{{"k": {k}}}')
                  for k in range(n_out))
    inputs = tuple(f"{DAY}/local+t+00000+{i:020d}.parquet" for i in range(n_in))
    files = {m.staged: f"out{k}".encode() for k, m in enumerate(moves)}
    files.update({p: b"in" for p in inputs})
    files[f"{DAY}/local+t+00001+{99:020d}.parquet"] = b"above W: not an input"
    return Journal("fs", "2026-11-01", 3, staging, moves, inputs), files


def assert_swapped(fs: MemFs, journal: Journal, before: dict[str, bytes]) -> None:
    for k, m in enumerate(journal.moves):
        assert fs.files[m.final] == f"out{k}".encode()
        assert fs.files[m.sidecar] == m.sidecar_body.encode()
    assert not any(p in fs.files for p in journal.deletes)
    assert not any(p.startswith("_compaction/") for p in fs.files)
    others = {p: v for p, v in before.items()
              if p not in journal.deletes and not p.startswith("_compaction/")}
    assert all(fs.files[p] == v for p, v in others.items())


def assert_nothing_lost(fs: MemFs, journal: Journal) -> None:
    """Readers never miss a row: an input disappears only once every output is visible."""
    inputs_gone = any(p not in fs.files for p in journal.deletes)
    if inputs_gone:
        assert all(m.final in fs.files and m.sidecar in fs.files for m in journal.moves)


def crashing_after(limit: int) -> object:
    """A FileOps wrapper that raises Crash once ``limit`` mutating calls have been made."""
    count = {"n": 0}

    def wrap(fs: MemFs) -> MemFs:
        class Wrapped(MemFs):
            def __init__(self) -> None:
                self.files = fs.files

            def _tick(self) -> None:
                if count["n"] >= limit:
                    raise Crash
                count["n"] += 1

            def write(self, path: str, data: bytes) -> None:
                self._tick()
                super().write(path, data)

            def rename(self, src: str, dst: str) -> None:
                self._tick()
                super().rename(src, dst)

            def delete(self, path: str) -> None:
                self._tick()
                super().delete(path)

            def delete_tree(self, path: str) -> None:
                self._tick()
                super().delete_tree(path)

        return Wrapped()

    return wrap


def no_crash(step: str) -> None:
    pass


@given(n_out=st.integers(1, 4), n_in=st.integers(1, 6),
       crashes=st.lists(st.integers(0, 20), max_size=3))
def test_a_crash_after_any_action_is_finished_by_the_next_run(
        n_out: int, n_in: int, crashes: list[int]) -> None:
    journal, before = make_journal(n_out, n_in)
    fs = MemFs(before)
    runs = [lambda f: commit_swap(f, journal, no_crash)] + [
        lambda f: recover_all(f) for _ in crashes]
    for limit, step in zip(crashes + [10**6], runs + [lambda f: recover_all(f)]):
        try:
            step(crashing_after(limit)(fs))  # type: ignore[operator]
        except Crash:
            pass
        assert_nothing_lost(fs, journal)
    recover_all(fs)
    if any(m.final in fs.files for m in journal.moves):
        assert_swapped(fs, journal, before)
    else:  # crashed before the journal existed: undone, the day is unchanged
        assert all(fs.files.get(p) == before[p] for p in journal.deletes)


def test_a_crash_before_the_journal_is_undone() -> None:
    journal, before = make_journal(2, 3)
    fs = MemFs(before)
    assert recover_all(fs).rolled_back == 1
    assert not any(p.startswith("_compaction/") for p in fs.files)
    assert all(fs.files[p] == b"in" for p in journal.deletes)


def test_roll_forward_skips_what_is_done_and_deletes_inputs_last() -> None:
    journal, before = make_journal(2, 2)
    m0, m1 = journal.moves
    present = frozenset([m0.final, m0.sidecar, m1.staged, *journal.deletes])
    actions = roll_forward(journal, present, "j")
    assert actions == [WriteFile(m1.sidecar, m1.sidecar_body), Rename(m1.staged, m1.final),
                       *(Delete(p) for p in journal.deletes), DeleteTree(journal.staging),
                       Delete("j")]


def test_an_output_neither_staged_nor_published_keeps_every_input() -> None:
    journal, before = make_journal(2, 2)
    fs = MemFs(before)
    del fs.files[journal.moves[1].staged]
    fs.write(journal_path("fs", "2026-11-01", 3), journal.to_json())
    with pytest.raises(ProtocolViolation):
        recover_all(fs)
    assert all(p in fs.files for p in journal.deletes)


def test_journal_round_trips() -> None:
    journal, _ = make_journal(3, 2)
    assert Journal.from_json(journal.to_json()) == journal


def test_local_fs_swap_publishes_outputs_and_never_overwrites(tmp_path: object) -> None:
    journal, before = make_journal(2, 3)
    fs = LocalFs(str(tmp_path))
    for p, v in before.items():
        fs.write(p, v)
    steps: list[str] = []
    commit_swap(fs, journal, steps.append)
    assert steps == ["before-journal", "after-journal", "mid-publish", "after-publish",
                     "mid-delete", "after-delete"]
    assert sorted(e.name for e in fs.list(DAY)) == sorted(
        [m.final.rpartition("/")[2] for m in journal.moves]
        + [m.sidecar.rpartition("/")[2] for m in journal.moves]
        + ["local+t+00001+00000000000000000099.parquet"])
    assert fs.list("_compaction/fs/day=2026-11-01") == []
    fs.write("a", b"1")
    fs.write("b", b"2")
    with pytest.raises(OSError):
        fs.rename("a", "b")
    assert fs.read("b") == b"2"


def test_finish_is_idempotent() -> None:
    journal, before = make_journal(2, 2)
    fs = MemFs(before)
    fs.write(journal_path("fs", "2026-11-01", 3), journal.to_json())
    finish(fs, journal)
    after = dict(fs.files)
    apply(fs, roll_forward(journal, frozenset(fs.files), "j"), no_crash)
    assert fs.files == after
