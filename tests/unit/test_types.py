"""The type checker passes on the modules setup.cfg's ``[mypy]`` lists, strictly.

Run as a test so that the README's one test command (and CI) fails on a type error;
``tox -e type`` runs the same check alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", "setup.cfg", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_pure_modules_type_check_strictly() -> None:
    result = mypy()
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_type_error_fails_the_check(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from garmexport.protocol.naming import day_name\n\n\n"
                   "def f(day) -> str:\n    return day_name('x')\n")
    result = mypy(str(bad))
    assert result.returncode == 1
    assert "Function is missing a type annotation" in result.stdout  # strict
    assert 'incompatible type "str"; expected "int"' in result.stdout
