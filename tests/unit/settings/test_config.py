"""The configuration: defaults, file, environment overrides, errors that say where, secrets."""

from __future__ import annotations

import dataclasses
import pickle
import re
from pathlib import Path

import pytest

from garmexport.settings.config import SECTIONS, Config
from garmexport.settings.load import load_config
from garmexport.settings.load import describe, env_name
from garmexport.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "config" / "garmexport.toml"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "garmexport.toml"
    path.write_text(text)
    return str(path)


def all_keys() -> list[tuple[str, str]]:
    return [(s, f.name) for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]


def test_defaults_need_no_file_and_no_environment():
    config = load_config(None, {})
    assert config.writer.max_file_rows == 1_000_000
    assert config.writer.max_file_bytes == 128 * 1024 * 1024
    assert config.writer.max_file_age_s == 60
    assert config.source.topic == "garmadon" and config.source.cluster == "local"
    assert config.kafka["fetch.queue.backoff.ms"] == 10
    assert config.kafka["enable.auto.commit"] is False
    assert config.compaction.lateness_s == 2 * 24 * 3600
    assert config.origin == ("defaults",)


def test_the_shipped_file_equals_the_embedded_defaults():
    assert load_config(str(SHIPPED), {}) == load_config(None, {})


def test_the_shipped_file_and_the_readme_mention_every_key():
    shipped = SHIPPED.read_text()
    readme = (ROOT / "README.md").read_text()
    for section, key in all_keys():
        assert re.search(rf"^{key} = ", shipped, re.M), f"{section}.{key} not in {SHIPPED}"
        assert f"`{env_name(section, key)}`" in readme, f"{section}.{key} not in README"


def test_a_file_overrides_defaults_and_keeps_the_rest(tmp_path):
    path = write(tmp_path, """
[writer]
max_file_age_s = 5
[kafka]
"bootstrap.servers" = "k1:9092,k2:9092"
""")
    config = load_config(path, {})
    assert config.writer.max_file_age_s == 5.0
    assert isinstance(config.writer.max_file_age_s, float)
    assert config.writer.max_file_rows == 1_000_000
    assert config.kafka["bootstrap.servers"] == "k1:9092,k2:9092"
    assert config.kafka["fetch.queue.backoff.ms"] == 10
    assert config.origin == ("defaults", path)


def test_unquoted_dotted_kafka_keys_are_flattened_back(tmp_path):
    path = write(tmp_path, "[kafka]\nsecurity.protocol = \"SASL_SSL\"\n")
    assert load_config(path, {}).kafka["security.protocol"] == "SASL_SSL"


def test_environment_overrides_the_file(tmp_path):
    path = write(tmp_path, "[writer]\nmax_file_age_s = 5\n")
    env = {"GARMEXPORT_WRITER_MAX_FILE_AGE_S": "30", "GARMEXPORT_LOG_FORMAT": "json",
           "GARMEXPORT_COMPACTION_SORT_COLUMNS": "hostname, timestamp",
           "GARMEXPORT_KAFKA_SECURITY_PROTOCOL": "SSL", "PATH": "/bin"}
    config = load_config(path, env)
    assert config.writer.max_file_age_s == 30.0
    assert config.log.format == "json"
    assert config.compaction.sort_columns == ("hostname", "timestamp")
    assert config.kafka["security.protocol"] == "SSL"
    assert config.origin == ("defaults", path, "environment")


@pytest.mark.parametrize("section,key", all_keys())
def test_every_key_has_an_environment_variable(section, key):
    default = getattr(getattr(Config(), section), key)
    text = ",".join(default) if isinstance(default, tuple) else str(default)
    config = load_config(None, {env_name(section, key): text})
    assert getattr(getattr(config, section), key) == default


@pytest.mark.parametrize("text,problem", [
    ("[writer]\nmax_file_age_s = -1\n", "writer.max_file_age_s = -1 .*must not be negative"),
    ("[writer]\nmax_file_rows = 0\n", "writer.max_file_rows = 0 .*must be >= 1"),
    ("[writer]\nmax_file_rows = \"many\"\n", "writer.max_file_rows = 'many' .*expected an integer"),
    ("[writer]\nmax_file_rows = 1.5\n", "writer.max_file_rows = 1.5 .*expected an integer"),
    ("[writer]\nmax_file_rows = true\n", "writer.max_file_rows = True .*expected an integer"),
    ("[writer]\nmax_file_age_s = nan\n", "writer.max_file_age_s = nan .*finite"),
    ("[metrics]\nport = 70000\n", "metrics.port = 70000 .*must be <= 65535"),
    ("[protocol]\nout_of_window = \"drop\"\n", "protocol.out_of_window = 'drop' .*quarantine, clamp"),
    ("[source]\ncluster = \"a+b\"\n", "source.cluster = 'a\\+b' .*must match"),
    ("[compaction]\nsort_columns = \"timestamp\"\n", "compaction.sort_columns .*list of strings"),
    ("[writer]\nmax_file_age = 3\n", "writer.max_file_age = 3 .*unknown key.*'max_file_age_s'"),
    ("[writter]\nmax_file_age_s = 3\n", "unknown section \\[writter\\].*'writer'"),
    ("writer = 3\n", "writer = 3 .*must be a table"),
    ("[kafka]\n\"group.id\" = \"g\"\n", "kafka.group.id = 'g' .*source.group_id"),
    ("[writer\n", "not valid TOML"),
    ("[protocol]\nrevoke_timeout_s = 20.0\n", "protocol.revoke_timeout_s = 20.0 .*removed: .*drops"),
])
def test_file_errors_name_the_key_the_value_and_the_file(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    message = str(caught.value)
    assert path in message
    assert re.search(problem, message), message


@pytest.mark.parametrize("var,text,problem", [
    ("GARMEXPORT_WRITER_MAX_FILE_AGE_S", "-3", "writer.max_file_age_s = '-3' .*negative"),
    ("GARMEXPORT_WRITER_MAX_FILE_ROWS", "lots", "writer.max_file_rows = 'lots' .*integer"),
    ("GARMEXPORT_METRICS_PORT", "1e3", "metrics.port = '1e3' .*integer"),
    ("GARMEXPORT_LOG_LEVEL", "infos", "log.level = 'infos' .*did you mean 'INFO'"),
    ("GARMEXPORT_WRITTER_MAX_FILE_AGE_S", "3", "unknown .*'GARMEXPORT_WRITER_MAX_FILE_AGE_S'"),
    ("GARMEXPORT_KAFKA_GROUP_ID", "g", "kafka.group.id = 'g' .*source.group_id"),
    ("GARMEXPORT_PROTOCOL_REVOKE_TIMEOUT_S", "20", "removed: .*drops"),
])
def test_environment_errors_name_the_key_the_value_and_the_variable(var, text, problem):
    with pytest.raises(ConfigError) as caught:
        load_config(None, {var: text})
    message = str(caught.value)
    assert var in message
    assert re.search(problem, message), message


def test_a_missing_file_is_a_config_error_naming_it(tmp_path):
    missing = str(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=re.escape(missing)):
        load_config(missing, {})


def test_the_config_path_variable_is_not_a_key():
    assert load_config(None, {"GARMEXPORT_CONFIG": "/x.toml"}).origin == ("defaults",)


SECRETS = {
    "GARMEXPORT_KAFKA_SASL_PASSWORD": "hunter2-sasl",
    "GARMEXPORT_KAFKA_SSL_KEY_PASSWORD": "hunter2-ssl",
    "GARMEXPORT_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET": "hunter2-oauth",
    "GARMEXPORT_KAFKA_SASL_OAUTHBEARER_CONFIG": "principal=x secret=hunter2-cfg",
    "GARMEXPORT_OUTPUT_S3_SECRET_ACCESS_KEY": "hunter2-s3",
    "GARMEXPORT_OUTPUT_S3_ACCESS_KEY_ID": "hunter2-id",
}


def test_secrets_are_usable_but_never_shown():
    config = load_config(None, SECRETS)
    assert config.consumer_settings()["sasl.password"] == "hunter2-sasl"
    assert config.output.s3_secret_access_key == "hunter2-s3"
    for shown in (repr(config), str(config), describe(config), repr(config.kafka),
                  repr(config.output)):
        assert "hunter2" not in shown
        assert "***" in shown


def test_a_bad_secret_value_is_masked_in_the_error(tmp_path):
    path = write(tmp_path, "[kafka]\n\"sasl.password\" = [1, 2]\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert "kafka.sasl.password = '***'" in str(caught.value)


def test_describe_is_toml_that_loads_back_to_the_same_config(tmp_path):
    config = load_config(None, {"GARMEXPORT_WRITER_MAX_FILE_AGE_S": "7",
                                "GARMEXPORT_KAFKA_CLIENT_ID": "exp-1"})
    path = write(tmp_path, describe(config))
    assert load_config(path, {}) == config


def test_describe_shows_what_a_parallelism_and_cores_of_0_resolve_to_here(monkeypatch):
    """``parallelism = 0`` alone does not say how many readers ``run`` starts (issue 32,
    item 8): the number found here stands beside it, and an explicit value stands alone."""
    from garmexport.settings import config as config_module

    monkeypatch.setattr(config_module, "usable_cpus", lambda: 3)
    text = describe(load_config(None, {"GARMEXPORT_ACTORS_CORES": "2"}))
    assert "\nparallelism = 0  # 0: the CPUs this process may use, 3 here\n" in text, text
    assert "\ncores = 2\n" in text, text


def test_consumer_settings_add_the_group_and_copy():
    config = load_config(None, {"GARMEXPORT_SOURCE_GROUP_ID": "g2"})
    settings = config.consumer_settings()
    assert settings["group.id"] == "g2"
    settings["bootstrap.servers"] = "elsewhere:1"
    assert config.kafka["bootstrap.servers"] == "127.0.0.1:9092"


def test_the_config_is_frozen_hashable_and_pickles():
    config = load_config(None, {"GARMEXPORT_KAFKA_CLIENT_ID": "x"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.writer.max_file_rows = 3  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(config)) == config
    assert hash(config) == hash(pickle.loads(pickle.dumps(config)))


def test_log_level_names_are_case_insensitive(tmp_path):
    config = load_config(write(tmp_path, '[log]\nlevel = "Warning"\n'),
                         {"GARMEXPORT_LOG_ACTOR_LEVEL": "debug"})
    assert (config.log.level, config.log.actor_level) == ("WARNING", "DEBUG")
    assert load_config(None, {"GARMEXPORT_LOG_LEVEL": "info"}).log.level == "INFO"


@pytest.mark.parametrize("env,problem", [
    ({"GARMEXPORT_KAFKA_BOOTSTRAP_SERVERSS": "x"},
     "kafka.bootstrap.serverss in environment variable GARMEXPORT_KAFKA_BOOTSTRAP_SERVERSS: "
     "unknown librdkafka key \\(did you mean GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS\\?\\)"),
    ({"GARMEXPORT_KAFKA_SESSION_TIMEOUT_MS": "soon"},
     "kafka.session.timeout.ms = 'soon' in environment variable "
     "GARMEXPORT_KAFKA_SESSION_TIMEOUT_MS: librdkafka refuses this value"),
    ({"GARMEXPORT_KAFKA_SASL_PASSWORD": "hunter2", "GARMEXPORT_KAFKA_SECURITY_PROTOCOL": "tcp"},
     "kafka.security.protocol = 'tcp' .*librdkafka refuses this value"),
])
def test_kafka_keys_and_values_the_client_refuses_are_errors_naming_the_variable(env, problem):
    with pytest.raises(ConfigError) as caught:
        load_config(None, env)
    assert re.search(problem, str(caught.value)), str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_an_unknown_kafka_key_in_a_file_names_the_file_and_the_close_key(tmp_path):
    path = write(tmp_path, '[kafka]\n"heartbeat.interval" = 500\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert str(caught.value) == (f"kafka.heartbeat.interval in {path}: unknown librdkafka key "
                                 "(did you mean 'heartbeat.interval.ms'?)")


def test_kafka_keys_known_only_to_producers_or_needing_this_machine_are_not_refused(tmp_path):
    config = load_config(None, {"GARMEXPORT_KAFKA_LINGER_MS": "5",
                                "GARMEXPORT_KAFKA_SSL_CA_LOCATION": str(tmp_path / "absent.pem"),
                                "GARMEXPORT_KAFKA_SECURITY_PROTOCOL": "SSL"})
    assert config.kafka["linger.ms"] == "5"


@pytest.mark.parametrize("var,text,problem", [
    ("GARMEXPORT_KAFKA_SESSION_TIMEOUT_MS", "-1", "outside allowed range"),
    ("GARMEXPORT_KAFKA_ENABLE_AUTO_COMMIT", "maybe", "Expected bool value"),
])
def test_every_kind_of_refused_kafka_value_is_a_config_error(var, text, problem):
    with pytest.raises(ConfigError) as caught:
        load_config(None, {var: text})
    assert var in str(caught.value) and problem in str(caught.value), str(caught.value)


def test_a_renamed_key_is_still_read_under_its_new_name_and_said(tmp_path):
    path = write(tmp_path, "[writer]\nbatch_max_records = 700\npoll_timeout_s = 0.2\n")
    config = load_config(path, {"GARMEXPORT_WRITER_POLL_TIMEOUT_S": "0.3"})
    assert config.source.poll_max_records == 700
    assert config.source.poll_timeout_s == 0.3  # the environment wins, as for any key
    assert not hasattr(config.writer, "batch_max_records")
    assert config.deprecated == (
        ("writer.batch_max_records", "source.poll_max_records", path),
        ("writer.poll_timeout_s", "source.poll_timeout_s", path),
        ("GARMEXPORT_WRITER_POLL_TIMEOUT_S", "GARMEXPORT_SOURCE_POLL_TIMEOUT_S", "environment"))
    # a bad value under the old name is named by the new key, with where it was set
    with pytest.raises(ConfigError, match=r"source\.poll_max_records = 0 .*garmexport\.toml"):
        load_config(write(tmp_path, "[writer]\nbatch_max_records = 0\n"), {})
    assert load_config(None, {}).deprecated == ()


def test_a_renamed_key_is_one_warning_line_naming_both_names(tmp_path, capsys):
    from garmexport.cli.main import main

    path = write(tmp_path, "[writer]\nbatch_max_records = 700\n[log]\nformat = \"json\"\n")
    assert main(["config", "--config", path]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "config_key_renamed" in line]
    assert len(said) == 1 and '"old": "writer.batch_max_records"' in said[0], said
    assert '"new": "source.poll_max_records"' in said[0] and '"level": "WARNING"' in said[0]
