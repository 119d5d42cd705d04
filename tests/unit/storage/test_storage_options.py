"""Every backend option comes from one ``[output]`` key and reaches the backend typed."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from garmexport.storage.open import open_output
from garmexport.settings.config import OutputConfig
from garmexport.settings.load import load_config
from garmexport.errors import ConfigError
from garmexport.storage.options import (KerberosOptions, S3Options, WebHdfsOptions, defaults,
                                        from_output)

#: a valid value different from the default, per backend key of [output]
OTHER: dict[str, object] = {
    "s3_endpoint_url": "http://127.0.0.1:9", "s3_region": "eu-west-3",
    "s3_access_key_id": "AKIA", "s3_secret_access_key": "hush",
    "s3_addressing_style": "virtual", "s3_attempts": 7, "s3_timeout_s": 4.5,
    "hdfs_user": "etl", "hdfs_http_port": 14000, "hdfs_timeout_s": 3.5, "hdfs_attempts": 5,
    "hdfs_retry_initial_s": 0.25, "hdfs_retry_max_s": 2.5, "hdfs_ca_file": "/etc/ca.pem",
    "hdfs_kerberos": True,
    "hdfs_kerberos_principal": "garm@EXAMPLE.COM", "hdfs_kerberos_keytab": "/etc/garm.keytab",
    "hdfs_kerberos_ccache": "/tmp/cc", "hdfs_kerberos_renew_s": 600.0,
}
KERBEROS = OutputConfig(hdfs_kerberos=True)  # the base: its sub-options exist only then
BACKEND_KEYS = sorted(f.name for f in dataclasses.fields(OutputConfig)
                      if f.name.startswith(("s3_", "hdfs_")))


def flat(options: object, prefix: str = "") -> dict[str, object]:
    """``backend.field[.field]`` -> value of a StorageOptions, nested options expanded."""
    out: dict[str, object] = {}
    items = options.items() if isinstance(options, dict) else dataclasses.asdict(options).items()
    for k, v in items:
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def changed_by(key: str) -> dict[str, object]:
    base = flat(from_output(KERBEROS))
    after = flat(from_output(dataclasses.replace(KERBEROS, **{key: OTHER[key]})))
    return {k: v for k, v in after.items() if base[k] != v}


def test_the_table_covers_every_backend_key_of_output() -> None:
    assert sorted(OTHER) == BACKEND_KEYS


@pytest.mark.parametrize("key", [k for k in BACKEND_KEYS if k != "hdfs_kerberos"])
def test_each_backend_key_changes_exactly_its_option(key: str) -> None:
    assert list(changed_by(key).values()) == [OTHER[key]], changed_by(key)


def test_kerberos_options_exist_only_when_kerberos_is_on() -> None:
    assert defaults().webhdfs.kerberos is None
    assert from_output(KERBEROS).webhdfs.kerberos == KerberosOptions(
        principal=None, keytab=None, ccache=None, renew_s=OutputConfig().hdfs_kerberos_renew_s)


def test_every_option_is_settable_from_output() -> None:
    settable = {k for key in BACKEND_KEYS if key != "hdfs_kerberos" for k in changed_by(key)}
    every = {f"webhdfs.{f.name}" for f in dataclasses.fields(WebHdfsOptions)
             if f.name != "kerberos"} | {f"s3.{f.name}" for f in dataclasses.fields(S3Options)}
    every |= {f"webhdfs.kerberos.{f.name}" for f in dataclasses.fields(KerberosOptions)}
    assert settable == every


def test_empty_strings_mean_not_set() -> None:
    o = from_output(OutputConfig(s3_region="", hdfs_user=""))
    assert o.s3.region is None and o.webhdfs.user is None and o.s3.endpoint_url is None


def test_credentials_never_show_in_the_options_repr() -> None:
    o = from_output(OutputConfig(s3_access_key_id="AKIA123", s3_secret_access_key="hush"))
    assert "AKIA123" not in repr(o) and "hush" not in repr(o)


def test_the_environment_reaches_the_s3_client(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"GARMEXPORT_OUTPUT_ROOT": f"s3://bucket/{uuid.uuid4().hex}",
           "GARMEXPORT_OUTPUT_S3_ENDPOINT_URL": "http://127.0.0.1:9",
           "GARMEXPORT_OUTPUT_S3_ADDRESSING_STYLE": "virtual",
           "GARMEXPORT_OUTPUT_S3_ATTEMPTS": "7", "GARMEXPORT_OUTPUT_S3_TIMEOUT_S": "4.5",
           "GARMEXPORT_OUTPUT_S3_REGION": "eu-west-3"}
    storage = open_output(load_config(None, env).output, "unit")
    config = storage._client.meta.config  # type: ignore[attr-defined]
    assert config.s3["addressing_style"] == "virtual"
    assert config.retries["total_max_attempts"] == 7  # attempts, the first one included
    assert (config.connect_timeout, config.read_timeout) == (4.5, 4.5)
    assert storage._client.meta.region_name == "eu-west-3"  # type: ignore[attr-defined]
    storage.close()


def test_the_environment_reaches_the_webhdfs_client() -> None:
    env = {"GARMEXPORT_OUTPUT_ROOT": f"hdfs://nn1/{uuid.uuid4().hex}",
           "GARMEXPORT_OUTPUT_HDFS_HTTP_PORT": "14000", "GARMEXPORT_OUTPUT_HDFS_USER": "etl",
           "GARMEXPORT_OUTPUT_HDFS_TIMEOUT_S": "3.5", "GARMEXPORT_OUTPUT_HDFS_ATTEMPTS": "5",
           "GARMEXPORT_OUTPUT_HDFS_RETRY_INITIAL_S": "0.25",
           "GARMEXPORT_OUTPUT_HDFS_RETRY_MAX_S": "2.5"}
    storage = open_output(load_config(None, env).output, "unit")
    client = storage._client  # type: ignore[attr-defined]
    assert client.urls == ["http://nn1:14000"] and client._session.params == {"user.name": "etl"}
    assert client._timeout == 3.5
    retry = storage._retry  # type: ignore[attr-defined]
    assert (retry["attempts"], retry["initial_s"], retry["max_s"]) == (5, 0.25, 2.5)
    storage.close()


def test_a_malformed_backend_value_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="GARMEXPORT_OUTPUT_HDFS_ATTEMPTS"):
        load_config(None, {"GARMEXPORT_OUTPUT_HDFS_ATTEMPTS": "many"})
    with pytest.raises(ConfigError, match="s3_addressing_style"):
        load_config(None, {"GARMEXPORT_OUTPUT_S3_ADDRESSING_STYLE": "sideways"})


def test_a_keytab_without_a_principal_is_refused_at_start_up(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"GARMEXPORT_OUTPUT_HDFS_KERBEROS": "true",
           "GARMEXPORT_OUTPUT_HDFS_KERBEROS_KEYTAB": "/etc/garm.keytab"}
    with pytest.raises(ConfigError, match="hdfs_kerberos_principal.*environment"):
        load_config(None, env)
    load_config(None, {**env, "GARMEXPORT_OUTPUT_HDFS_KERBEROS_PRINCIPAL": "garm@EXAMPLE.COM"})
    from garmexport.cli import main as cli

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli.main(["config"]) == 2
    assert "hdfs_kerberos_principal" in capsys.readouterr().err
