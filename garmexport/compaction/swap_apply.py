"""Applying a swap's actions (:mod:`.swap` computes them): files through ``FileOps``, the
metastore flips and time records through :class:`Effects`, with the crash hooks of the
tests at their steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from garmexport.compaction.swap import (Action, Copy, Delete, DeleteTree, Flipped, Hold,
                                        Locate, Rename, Retire, WriteFile, crash_point)
from garmexport.errors import ProtocolViolation


class Effects:
    """What :func:`apply` does beyond files: the metastore flips and the time records.

    ``locate(path)`` points the day's partition at ``path`` (relative to the root);
    ``flipped(path)`` records the flip's wall time at ``path``; ``retire(view)`` records
    the view's retirement time. The default does none, which is right only for journals
    without a view.
    """

    def locate(self, path: str) -> None:
        raise ProtocolViolation(f"a swap with a metastore view needs the metastore to point "
                                f"the partition at {path}; run compact with Hive on")

    def flipped(self, path: str) -> None:
        raise ProtocolViolation(f"cannot record the flip at {path} without a clock")

    def retire(self, view: str) -> None:
        raise ProtocolViolation(f"cannot retire view {view} without a clock")

    def sweep(self) -> None:
        """Copy into the view what the day directory gained since the actions were
        computed; called right before the flip to the view. Nothing by default."""


def apply(fs: object, actions: Iterable[Action],
          crash: Callable[[str], None] = crash_point, effects: Effects | None = None,
          view: bool = False) -> float:
    """Apply ``actions`` in order with the FileOps ``fs``, calling the crash hooks.

    ``view``: the actions are a swap's with a metastore view, whose renames go into the
    view (taken for granted when they flip the partition); a plain swap's renames publish.
    Each crash point is called once, at its place in :data:`STEPS` order. Returns the
    seconds from the first output published into the day directory to the last input
    deleted from it: the window in which a path reader can see rows twice (0 when this
    call published nothing).
    """
    effects = effects or Effects()
    actions = list(actions)
    viewed = view or any(isinstance(a, Locate) for a in actions)  # else: renames publish
    said: set[str] = set()
    window: list[float] = []  # [opened, closed]

    def once(step: str) -> None:
        if step not in said:
            said.add(step)
            if step == "after-delete" and window:
                window.append(time.monotonic())
            crash(step)

    def publishing() -> None:
        if not window:
            window.append(time.monotonic())

    for a in actions:
        if isinstance(a, WriteFile):
            fs.write(a.path, a.body.encode())  # type: ignore[attr-defined]
        elif isinstance(a, Rename):
            if not viewed:
                publishing()
            fs.rename(a.src, a.dst)  # type: ignore[attr-defined]
            once("mid-view" if viewed else "mid-publish")
        elif isinstance(a, Copy):
            if a.publish:
                publishing()
            fs.copy(a.src, a.dst)  # type: ignore[attr-defined]
            if a.publish:
                once("mid-publish")
        elif isinstance(a, Locate):
            if a.back:
                once("after-publish")
                once("after-delete")
            else:
                once("after-view")
                # a file published since the view was filled is in the day directory
                # metastore readers see until the flip: the view must hold it first
                effects.sweep()
            effects.locate(a.path)
            once("after-unflip" if a.back else "after-flip")
        elif isinstance(a, Hold):  # no crash point: a step back to step 3, not one of STEPS
            # the record first: one left beside a partition on the day directory would let
            # the next run count the grace from a flip readers have since left
            fs.delete(a.flip_record)  # type: ignore[attr-defined]
            effects.locate(a.path)
        elif isinstance(a, Flipped):
            effects.flipped(a.path)
        elif isinstance(a, Retire):
            effects.retire(a.view)
        elif isinstance(a, Delete):
            once("after-publish")
            fs.delete(a.path)  # type: ignore[attr-defined]
            once("mid-delete")
        elif isinstance(a, DeleteTree):
            once("after-publish")
            once("after-delete")
            fs.delete_tree(a.path)  # type: ignore[attr-defined]
    return window[1] - window[0] if len(window) == 2 else 0.0
