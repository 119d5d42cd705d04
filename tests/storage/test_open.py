"""open_storage picks the backend from the root URI's scheme."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from garmexport.errors import ConfigError
from garmexport.storage.local import LocalStorage
from garmexport.storage.open import open_storage
from garmexport.storage.options import defaults
from garmexport.storage.s3 import S3Storage
from garmexport.storage.webhdfs import WebHdfsStorage
from tests.webhdfs_server import WebHdfsServer


def test_a_plain_path_and_a_file_uri_open_the_local_backend(tmp_path: Path) -> None:
    plain = open_storage(str(tmp_path / "a"), "inst-a")
    uri = open_storage((tmp_path / "b").as_uri(), "inst-a")
    assert isinstance(plain, LocalStorage) and isinstance(uri, LocalStorage)
    assert plain.root == str(tmp_path / "a") and uri.root == str(tmp_path / "b")
    assert uri.uri == (tmp_path / "b").as_uri()


def test_webhdfs_uri_lists_ha_namenodes_with_their_http_ports() -> None:
    s = open_storage("webhdfs://nn1:50070,nn2:9871/data/out", "inst-a",
                     dataclasses.replace(defaults(), webhdfs=dataclasses.replace(
                         defaults().webhdfs, user="etl")))
    assert isinstance(s, WebHdfsStorage)
    assert s._client.urls == ["http://nn1:50070", "http://nn2:9871"]
    assert s.root == "/data/out" and s.uri == "webhdfs://nn1:50070,nn2:9871/data/out"
    s.close()


def test_hdfs_uri_uses_the_webhdfs_http_port_not_the_rpc_port() -> None:
    s = open_storage("hdfs://nn1:8020,nn2/out", "inst-a", dataclasses.replace(
        defaults(), webhdfs=dataclasses.replace(defaults().webhdfs, http_port=14000)))
    assert isinstance(s, WebHdfsStorage)
    assert s._client.urls == ["http://nn1:14000", "http://nn2:14000"]
    assert s.uri == "hdfs://nn1:8020,nn2/out"
    s.close()
    secure = open_storage("swebhdfs://nn1/out", "inst-a")
    assert secure._client.urls == ["https://nn1:9870"]
    secure.close()


def test_webhdfs_uri_reaches_a_server(webhdfs_server: WebHdfsServer) -> None:
    s = open_storage(f"webhdfs://127.0.0.1:{webhdfs_server.server_address[1]}/r", "inst-a")
    s.put_exclusive("x", b"1")
    assert s.read("x") == b"1"
    s.close()


def test_s3_uri_names_bucket_and_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    s = open_storage("s3://bucket/some/prefix/", "inst-a", dataclasses.replace(
        defaults(), s3=dataclasses.replace(defaults().s3, access_key_id="k",
                                           secret_access_key="s")))
    assert isinstance(s, S3Storage)
    assert (s.bucket, s.prefix, s.uri) == ("bucket", "some/prefix", "s3://bucket/some/prefix")
    assert s._client.meta.endpoint_url == "http://127.0.0.1:1"
    s.close()


@pytest.mark.parametrize("uri", ["ftp://host/x", "gs://bucket/x", "s3:///nobucket",
                                 "webhdfs:///nohost"])
def test_unknown_schemes_and_missing_hosts_are_config_errors(uri: str) -> None:
    with pytest.raises(ConfigError):
        open_storage(uri, "inst-a")
