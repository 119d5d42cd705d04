"""The layers hold: the import contracts in setup.cfg ``[importlinter]`` are kept.

Run as a test so that the README's one test command (and CI) fails on an upward import,
an import circle, or an impure import in ``protocol`` or ``wire``; ``tox -e lint`` runs the
same check alone. The second test plants violations in a copy of the package, so a check
that passes for the wrong reason (no contract read, nothing analysed) fails here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"


def lint(where: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run([sys.executable, "-c", LINT], cwd=where, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_import_contract_is_kept() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout, result.stdout


def test_an_upward_a_circular_and_an_impure_import_each_break_a_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "garmexport", tmp_path / "garmexport",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "setup.cfg", tmp_path / "setup.cfg")
    with open(tmp_path / "garmexport" / "protocol" / "naming.py", "a") as f:
        f.write("\nimport time  # planted: a clock in the protocol\n")
    with open(tmp_path / "garmexport" / "storage" / "paths.py", "a") as f:
        f.write("\nfrom garmexport.pipeline import publisher  # planted: upward\n")
    with open(tmp_path / "garmexport" / "wire" / "frames.py", "a") as f:
        f.write("\nfrom garmexport.wire import columns  # planted: a circle\n")
    result = lint(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    for contract in ("Layers import downwards only", "The commit protocol is pure",
                     "No import circles"):
        assert any(line.startswith(contract) and line.endswith("BROKEN")
                   for line in result.stdout.splitlines()), (contract, result.stdout)
    assert "1 kept, 3 broken" in result.stdout, result.stdout  # the wire contract holds
