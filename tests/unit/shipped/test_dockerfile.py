"""The Dockerfile builds what the Mesos definitions run.

No container engine runs here, so the image build itself is not exercised: these tests
read the Dockerfile and check that what it copies exists, that each image runs
``garmexport`` as a non-root user, that the exporter image leaves Spark out and the
compaction image puts it in, and that ``mesos/*.json`` name those images and commands.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
from pathlib import Path

import pytest

from garmexport import __version__
from garmexport.settings.config import MetricsConfig

REPO = Path(__file__).resolve().parents[3]


def stages() -> dict[str, list[tuple[str, str]]]:
    """Stage name -> its instructions (KEYWORD, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    out: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            current = out.setdefault(rest.split(" AS ")[-1].strip(), [])
        current.append((keyword.upper(), rest.strip()))
    return out


def args(stage: list[tuple[str, str]], keyword: str) -> list[str]:
    return [rest for kw, rest in stage if kw == keyword]


def test_every_path_the_dockerfile_copies_from_the_repository_exists() -> None:
    copies = [rest for stage in stages().values() for rest in args(stage, "COPY")
              if not rest.startswith("--from")]
    assert copies
    for rest in copies:
        *sources, _ = shlex.split(rest)
        for source in sources:
            assert (REPO / source).exists(), source
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    for rest in copies:  # the .dockerignore must let each source into the build context
        for source in shlex.split(rest)[:-1]:
            assert f"!{source.rstrip('/')}" in [i.rstrip("/") for i in ignore], source


def test_the_default_image_is_the_exporter_without_spark() -> None:
    all_stages = stages()
    assert list(all_stages)[-1] == "exporter"  # `docker build .` builds the last stage
    exporter = all_stages["exporter"]
    installs = " ".join(r for r in args(exporter, "RUN") if "pip install" in r)
    assert "garmexport" in installs and "spark" not in installs
    assert "java" not in " ".join(args(exporter, "RUN"))
    assert args(exporter, "EXPOSE") == [str(MetricsConfig().port)]
    assert args(exporter, "CMD") == ['["run"]']


def test_the_compaction_image_adds_spark_and_java() -> None:
    compaction = stages()["compaction"]
    runs = " ".join(args(compaction, "RUN"))
    assert "garmexport[spark" in runs and "openjdk-17-jre-headless" in runs


@pytest.mark.parametrize("stage", ["exporter", "compaction"])
def test_each_image_runs_the_console_script_as_a_non_root_user(stage: str) -> None:
    instructions = stages()[stage]
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    script = cfg["options.entry_points"]["console_scripts"].strip().split(" =")[0]
    assert args(instructions, "ENTRYPOINT") == [json.dumps([script])]
    users = args(instructions, "USER")
    assert users and users[-1] not in ("root", "0")
    assert any("useradd" in r and r.endswith(f" {users[-1]}") for r in args(instructions, "RUN"))


@pytest.mark.parametrize("definition, image, command", [
    ("garmexport.json", "garmexport", "run"),
    ("compaction.json", "garmexport-compaction", "compact"),
])
def test_the_mesos_definitions_name_the_images_of_this_version(definition: str, image: str,
                                                               command: str) -> None:
    spec = json.loads((REPO / "mesos" / definition).read_text())
    spec = spec.get("run", spec)  # Metronome nests the task under "run"
    name = spec.get("container", spec)["docker"]["image"]
    repository, _, tag = name.rpartition(":")
    assert repository.rpartition("/")[2] == image and tag == __version__
    # Mesos runs a shell `cmd` in place of the image's entry point: it must exec the script.
    assert re.search(rf"(^|&& )exec garmexport {command}\b", spec["cmd"]), spec["cmd"]
