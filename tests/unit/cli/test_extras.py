"""The exporter installs and runs without PySpark; compaction says which extra it needs.

PySpark is installed here, so its absence is simulated in a child process by an import
hook that refuses ``pyspark`` the way a missing package does (ModuleNotFoundError).
"""

from __future__ import annotations

import configparser
import pkgutil
import subprocess
import sys
from pathlib import Path

import garmexport

REPO = Path(__file__).resolve().parents[3]
_NO_SPARK = """
import sys
class NoSpark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoSpark())
"""


def _without_spark(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _NO_SPARK + code], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "PYTHONPATH": str(REPO)})


def test_compact_without_pyspark_exits_2_with_one_line_naming_the_extra(tmp_path: Path) -> None:
    res = _without_spark("from garmexport.cli.main import main\n"
                         "sys.exit(main(['compact', '--dry-run']))", tmp_path)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("garmexport compact: ")
    assert "pip install 'garmexport[spark]'" in lines[0]


def test_every_exporter_module_imports_without_pyspark(tmp_path: Path) -> None:
    names = [m.name for m in pkgutil.walk_packages(garmexport.__path__, "garmexport.")
             if m.name != "garmexport.__main__"]  # runs the command line
    assert "garmexport.actors.run_export" in names and "garmexport.cli.run" in names
    res = _without_spark("import importlib\n"
                         f"for name in {names!r}:\n"
                         "    importlib.import_module(name)\n"
                         "from garmexport.cli.main import main\n"
                         "sys.exit(main(['config']))", tmp_path)
    assert res.returncode == 0, res.stderr
    assert "[output]" in res.stdout


def test_pyspark_is_an_extra_that_the_tests_and_the_demo_install() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")

    def packages(value: str) -> list[str]:
        return [line.split("#")[0].strip() for line in value.splitlines()
                if line.split("#")[0].strip()]

    assert "pyspark" not in packages(cfg["options"]["install_requires"])
    extras = cfg["options.extras_require"]
    assert packages(extras["spark"]) == ["pyspark"]
    assert "pyspark" in packages(extras["test"])
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    assert tox["testenv"]["extras"].strip() == "test"
    assert tox["testenv:demo"].get("extras", tox["testenv"]["extras"]).strip() in ("test",
                                                                                  "spark")


def test_kerberos_without_requests_gssapi_is_a_config_error_naming_the_extra(
        tmp_path: Path) -> None:
    block = _NO_SPARK.replace('"pyspark"', '"requests_gssapi"').replace(
        '"pyspark."', '"requests_gssapi."')
    res = subprocess.run(
        [sys.executable, "-c", block + "from garmexport.storage.open import open_storage\n"
         "from garmexport.storage.options import from_output\n"
         "from garmexport.settings.config import OutputConfig\n"
         "open_storage('webhdfs://nn/out', 'x', from_output(OutputConfig(hdfs_kerberos=True)))"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("garmexport.errors.ConfigError: output.hdfs_kerberos = true")
    assert "pip install 'garmexport[kerberos]'" in last
