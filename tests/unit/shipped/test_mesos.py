"""The Marathon app and the compaction schedules are complete and agree with the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from garmexport.settings.load import load_config
from garmexport.observe.health import LIVE_PATH, READY_PATH

MESOS = Path(__file__).resolve().parents[3] / "mesos"
APP_KEYS = {"id", "cmd", "instances", "cpus", "mem", "env", "portDefinitions", "healthChecks",
            "readinessChecks", "upgradeStrategy", "unreachableStrategy", "killSelection",
            "taskKillGracePeriodSeconds"}


def load(name: str) -> dict:
    return json.loads((MESOS / name).read_text())


@pytest.fixture
def app() -> dict:
    return load("garmexport.json")


@pytest.fixture
def job() -> dict:
    return load("compaction.json")


def test_the_app_has_every_required_key(app: dict) -> None:
    assert APP_KEYS <= app.keys(), APP_KEYS - app.keys()
    assert app["instances"] >= 1 and app["cpus"] > 0 and app["mem"] > 0


def test_the_command_runs_the_exporter_on_the_marathon_port(app: dict) -> None:
    cmd = app["cmd"]
    assert re.search(r"\bexec garmexport run --config \S+", cmd)
    # Marathon env values are static: the port only reaches the exporter through cmd.
    assert "GARMEXPORT_METRICS_PORT=$PORT0" in cmd
    assert "GARMEXPORT_METRICS_PORT" not in app["env"]


def test_env_sets_only_real_config_keys_with_valid_values(app: dict, job: dict) -> None:
    for env in (app["env"], job["run"]["env"]):
        assert all(isinstance(v, str) for v in env.values())
        # load_config raises ConfigError on an unknown variable or a bad value.
        load_config(None, {**env, "GARMEXPORT_METRICS_PORT": "31000"})
    config = load_config(None, {**app["env"], "GARMEXPORT_METRICS_PORT": "31000"})
    assert config.metrics.port == 31000
    # Marathon's checks come from the agent, not from loopback.
    assert config.metrics.host == "0.0.0.0"
    assert config.source.topic == app["env"]["GARMEXPORT_SOURCE_TOPIC"]
    assert config.output.root == app["env"]["GARMEXPORT_OUTPUT_ROOT"]
    assert config.kafka["bootstrap.servers"] == app["env"]["GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS"]


def test_no_secret_sits_in_the_app_definition(app: dict, job: dict) -> None:
    for env in (app["env"], job["run"]["env"]):
        for name in env:
            assert not re.search(r"PASSWORD|SECRET|TOKEN|CREDENTIAL|JAAS", name), name


def test_health_checks_probe_what_the_exporter_serves_on_its_port(app: dict) -> None:
    [port] = app["portDefinitions"]
    [live] = app["healthChecks"]
    [ready] = app["readinessChecks"]
    assert live["path"] == LIVE_PATH and live["protocol"] in ("HTTP", "MESOS_HTTP")
    assert live["portIndex"] == 0  # PORT0, the port cmd gives the exporter
    assert ready["path"] == READY_PATH and ready["portName"] == port["name"]
    assert ready["httpStatusCodesForReady"] == [200]
    # Start-up reads markers and waits for the group before the first tick.
    assert live["gracePeriodSeconds"] >= 60


def test_upgrades_keep_the_group_consuming(app: dict) -> None:
    strategy = app["upgradeStrategy"]
    assert strategy["minimumHealthCapacity"] == 1
    # Above 0, or Marathon could neither start a new task nor stop an old one.
    assert 0 < strategy["maximumOverCapacity"] <= 1
    assert app["killSelection"] in ("YOUNGEST_FIRST", "OLDEST_FIRST")
    unreachable = app["unreachableStrategy"]
    assert 0 < unreachable["inactiveAfterSeconds"] <= unreachable["expungeAfterSeconds"]


def test_the_kill_grace_period_outlasts_a_clean_shutdown(app: dict) -> None:
    config = load_config(None, {**app["env"], "GARMEXPORT_METRICS_PORT": "31000"})
    assert app["taskKillGracePeriodSeconds"] > config.protocol.shutdown_timeout_s


def test_the_compaction_job_runs_compact_on_a_utc_schedule(job: dict) -> None:
    assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", job["id"])  # Metronome job ids
    assert re.search(r"\bgarmexport compact --config \S+", job["run"]["cmd"])
    assert job["run"]["cpus"] > 0 and job["run"]["mem"] > 0
    [schedule] = job["schedules"]
    assert schedule["enabled"] and schedule["timezone"] == "UTC"
    assert len(schedule["cron"].split()) == 5


def test_the_cron_alternative_has_the_same_schedule_and_never_overlaps(job: dict) -> None:
    lines = [line for line in (MESOS / "compaction.cron").read_text().splitlines()
             if line.strip() and not line.startswith("#") and "=" not in line.split()[0]]
    [entry] = lines
    fields = entry.split()
    assert " ".join(fields[:5]) == job["schedules"][0]["cron"]
    command = " ".join(fields[6:])
    assert command.startswith("flock -n ") and "garmexport compact --config" in command
