"""Open the output root named by a URI, choosing the backend by scheme.

==========================================  ==========================================
root URI                                    backend
==========================================  ==========================================
``/data/out``, ``out``, ``file:///data``    :class:`~garmexport.storage.local.LocalStorage`
``webhdfs://nn1:9870,nn2:9870/path``        WebHDFS; the ports are HTTP ports; several
                                            hosts = HA NameNodes, tried in turn
``swebhdfs://...``                          the same over HTTPS
``hdfs://nameservice-or-nn[:rpc]/path``     WebHDFS on the same hosts at
                                            ``webhdfs.http_port`` (default 9870); the RPC
                                            port is ignored, the URI kept for Spark
``s3://bucket/prefix``                      :class:`~garmexport.storage.s3.S3Storage`
==========================================  ==========================================

Options (strings, from the config file or environment): ``webhdfs.user``,
``webhdfs.kerberos`` (true/false), ``webhdfs.http_port``, ``webhdfs.timeout_s``,
``webhdfs.attempts``; ``s3.endpoint``, ``s3.region``, ``s3.access_key``,
``s3.secret_key``, ``s3.addressing_style``, ``s3.attempts``. S3 settings not given fall
back to ``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION`` and botocore's usual credential chain.
Unknown schemes and malformed values raise ConfigError.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from garmexport.errors import ConfigError
from garmexport.storage.base import Storage

_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off", ""}


def open_storage(root_uri: str, instance: str,
                 options: Mapping[str, str] | None = None) -> Storage:
    """The Storage for ``root_uri``; ``instance`` names this process's temp directory."""
    opts = dict(options or {})
    scheme = urlsplit(root_uri).scheme.lower() if "://" in root_uri else ""
    if scheme in ("", "file"):
        from garmexport.storage.local import LocalStorage

        path = unquote(urlsplit(root_uri).path) if scheme else root_uri
        return LocalStorage(path, instance)
    if scheme in ("webhdfs", "swebhdfs", "hdfs"):
        return _webhdfs(root_uri, scheme, instance, opts)
    if scheme == "s3":
        return _s3(root_uri, instance, opts)
    raise ConfigError(f"storage root {root_uri!r}: unknown scheme {scheme!r} "
                      "(use a path, file://, hdfs://, webhdfs://, swebhdfs:// or s3://)")


def _hosts(root_uri: str) -> tuple[list[str], str]:
    """Comma-separated ``host[:port]`` list and path of a URI (urlsplit rejects the list)."""
    rest = root_uri.split("://", 1)[1]
    authority, slash, path = rest.partition("/")
    hosts = [h for h in authority.split(",") if h]
    if not hosts:
        raise ConfigError(f"storage root {root_uri!r} names no host")
    return hosts, unquote("/" + path if slash else "/")


def _webhdfs(root_uri: str, scheme: str, instance: str, opts: dict[str, str]) -> Storage:
    from garmexport.storage.webhdfs import WebHdfsStorage

    hosts, path = _hosts(root_uri)
    http = "https" if scheme == "swebhdfs" else "http"
    port = _int(opts, "webhdfs.http_port", 9870)
    urls = []
    for h in hosts:
        name, _, given = h.rpartition(":") if ":" in h else (h, "", "")
        if scheme == "hdfs" or not given:
            urls.append(f"{http}://{name}:{port}")  # hdfs:// carries the RPC port, not HTTP
        else:
            urls.append(f"{http}://{h}")
    return WebHdfsStorage(urls, path, instance, uri=root_uri.rstrip("/"),
                          user=opts.get("webhdfs.user") or None,
                          kerberos=_bool(opts, "webhdfs.kerberos"),
                          timeout_s=_float(opts, "webhdfs.timeout_s", 30.0),
                          attempts=_int(opts, "webhdfs.attempts", 3))


def _s3(root_uri: str, instance: str, opts: dict[str, str]) -> Storage:
    from garmexport.storage.s3 import S3Storage

    parts = urlsplit(root_uri)
    if not parts.netloc:
        raise ConfigError(f"storage root {root_uri!r} names no bucket")
    env = os.environ
    return S3Storage(
        parts.netloc, unquote(parts.path), instance,
        endpoint_url=opts.get("s3.endpoint") or env.get("AWS_ENDPOINT_URL") or None,
        access_key=opts.get("s3.access_key") or None,
        secret_key=opts.get("s3.secret_key") or None,
        region=opts.get("s3.region") or env.get("AWS_DEFAULT_REGION") or None,
        addressing_style=opts.get("s3.addressing_style", "path"),
        attempts=_int(opts, "s3.attempts", 3))


def _bool(opts: Mapping[str, str], key: str) -> bool:
    value = opts.get(key, "false").strip().lower()
    if value not in _TRUE | _FALSE:
        raise ConfigError(f"storage option {key}={value!r} is not true or false")
    return value in _TRUE


def _int(opts: Mapping[str, str], key: str, default: int) -> int:
    return int(_float(opts, key, default))


def _float(opts: Mapping[str, str], key: str, default: float) -> float:
    try:
        return float(opts.get(key, default))
    except ValueError:
        raise ConfigError(f"storage option {key}={opts[key]!r} is not a number") from None
