"""What repair's steps tell the operator while they run: the command's progress line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Tick(Protocol):
    """The command's progress line (:class:`garmexport.cli.verify.Ticker`): ``text(s)`` is
    printed when its interval has passed (``force``: at once), ``s`` the seconds since the
    command started."""

    def __call__(self, text: Callable[[float], str], force: bool = False) -> None: ...

    def elapsed(self) -> float: ...
