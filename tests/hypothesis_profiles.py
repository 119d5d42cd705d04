"""Hypothesis profiles: a quick one for local runs, the thorough one in CI.

``tests/conftest.py`` registers both and loads one before any test module is imported:

- ``ci`` when the ``CI`` environment variable is set (CI services set it, ``.ci/run``
  too): every property test runs the number of examples it states, 100 when it states none;
- ``dev`` otherwise: a tenth of that (at least 10), for a quick local run;
- ``HYPOTHESIS_PROFILE=ci`` (or ``dev``) chooses explicitly, e.g. for a thorough local run.

A test that needs more examples than the default states them as ``examples(n)``, so the
number it states is the thorough one and the quick run scales with it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hypothesis import settings

PROFILE_ENV = "HYPOTHESIS_PROFILE"
CI, DEV = "ci", "dev"
_DEFAULT_EXAMPLES = 100
_DEV_SHARE, _DEV_MIN = 10, 10


def chosen(env: Mapping[str, str] = os.environ) -> str:
    """The profile this run uses (see the module docstring)."""
    if env.get(PROFILE_ENV):
        return env[PROFILE_ENV]
    return CI if env.get("CI") else DEV


def examples(n: int, env: Mapping[str, str] = os.environ) -> int:
    """``n`` examples in the thorough profile, a tenth of them (at least 10) in the quick one."""
    return n if chosen(env) == CI else max(_DEV_MIN, n // _DEV_SHARE)


def register() -> str:
    """Register both profiles, load the chosen one and return its name."""
    settings.register_profile(CI, max_examples=_DEFAULT_EXAMPLES, deadline=None,
                              print_blob=True)
    settings.register_profile(DEV, max_examples=examples(_DEFAULT_EXAMPLES, {}),
                              deadline=None)
    name = chosen()
    settings.load_profile(name)
    return name
