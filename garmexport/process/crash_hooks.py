"""TEST ONLY: the one crash hook of the process, at the named steps of the commit protocol
(``garmexport.pipeline.crash_points``) and of a compaction swap (``garmexport.compaction.swap``).

``TEST_GARMEXPORT_CRASH_AFTER=<step>[:<n>][:<action>]`` acts at the ``n``-th time (default
1; ``*``: every time) this process reaches ``step`` (``*``: any step):

- ``exit`` (the default): exit at once, ``os._exit(137)``, as a SIGKILL would;
- ``stop``: stop the process (SIGSTOP, as a scheduler pausing it would) and go on once it
  is continued (SIGCONT): a test acts meanwhile (makes it a zombie, samples a reader);
- ``stop-exit``: stop, and exit once continued: an exit from inside is not a kill from
  outside (a JVM child outlives it), so the test delivers the real SIGKILL to the process
  group while it is stopped.

The variable is read at each step (a test process may set it while it runs); unset, a
step costs one environment lookup. Not ``GARMEXPORT_*``: the configuration rejects
variables it does not know.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

CRASH_ENV = "TEST_GARMEXPORT_CRASH_AFTER"
EXIT, STOP, STOP_EXIT = "exit", "stop", "stop-exit"
ACTIONS = (EXIT, STOP, STOP_EXIT)
ANY = "*"
#: stop at every step, go on once continued: a test acts between the steps
PAUSE_AT_EVERY_STEP = f"{ANY}:{ANY}:{STOP}"

_seen: Counter[str] = Counter()
_lock = threading.Lock()  # pool threads reach steps too


@dataclass(frozen=True)
class Spec:
    step: str  # or ANY
    nth: int | None  # None: every time
    action: str


@functools.lru_cache(maxsize=8)
def parse(text: str) -> Spec:
    """The spec of a :data:`CRASH_ENV` value; ValueError naming the variable if malformed."""
    step, _, rest = text.partition(":")
    nth, _, action = rest.partition(":")
    action = action or EXIT
    if not step or action not in ACTIONS or not (nth in ("", ANY) or nth.isdigit()):
        raise ValueError(f"{CRASH_ENV}={text!r}: expected <step>[:<n>|*][:{'|'.join(ACTIONS)}]")
    return Spec(step, None if nth == ANY else int(nth or 1), action)


def hook(step: str, known: Collection[str]) -> None:
    """TEST ONLY: act at ``step`` (one of ``known``) if :data:`CRASH_ENV` asks for it."""
    if step not in known:
        raise ValueError(f"{step!r} is not a crash step here ({', '.join(known)})")
    text = os.environ.get(CRASH_ENV)
    if not text:
        return
    spec = parse(text)
    if spec.step not in (step, ANY):
        return
    with _lock:
        _seen[step] += 1
        due = spec.nth is None or _seen[step] == spec.nth
    if not due:
        return
    if spec.action in (STOP, STOP_EXIT):
        os.kill(os.getpid(), signal.SIGSTOP)  # returns when continued
    if spec.action in (EXIT, STOP_EXIT):
        os._exit(137)
