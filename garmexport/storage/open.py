"""Open the output root named by a URI, choosing the backend by scheme.

==========================================  ==========================================
root URI                                    backend
==========================================  ==========================================
``/data/out``, ``out``, ``file:///data``    :class:`~garmexport.storage.local.LocalStorage`
``webhdfs://nn1:9870,nn2:9870/path``        WebHDFS; the ports are HTTP ports; several
                                            hosts = HA NameNodes, tried in turn
``swebhdfs://...``                          the same over HTTPS (the servers'
                                            certificates checked against
                                            ``output.hdfs_ca_file``)
``hdfs://nameservice-or-nn[:rpc]/path``     WebHDFS on the same hosts at
                                            ``webhdfs.http_port`` (default 9870); the RPC
                                            port is ignored, the URI kept for Spark
``s3://bucket/prefix``                      :class:`~garmexport.storage.s3.S3Storage`
==========================================  ==========================================

Options come typed from ``[output]`` (:mod:`garmexport.storage.options`); without them
the defaults of a default ``[output]`` apply. S3 settings not given fall back to
``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION`` and botocore's usual credential chain.
Unknown schemes and URIs without a host or bucket raise ConfigError.
"""

from __future__ import annotations

import dataclasses
import os
from urllib.parse import unquote, urlsplit

from garmexport.errors import ConfigError
from garmexport.storage.base import Storage
from garmexport.settings.config import OutputConfig
from garmexport.storage.options import (S3Options, StorageOptions, WebHdfsOptions, defaults,
                                       from_output)


def open_output(output: OutputConfig, instance: str) -> Storage:
    """The store of the configured output (``[output]``: its root and its store's options);
    ``instance`` names this process's temp directory."""
    return open_storage(output.root, instance, from_output(output))


def open_storage(root_uri: str, instance: str, options: StorageOptions | None = None,
                 create: bool = True) -> Storage:
    """The Storage for ``root_uri``; ``instance`` names this process's temp directory.
    ``create`` False: a missing local root is left missing (see :mod:`.root_check`)."""
    opts = options or defaults()
    scheme = urlsplit(root_uri).scheme.lower() if "://" in root_uri else ""
    if scheme in ("", "file"):
        from garmexport.storage.local import LocalStorage

        path = unquote(urlsplit(root_uri).path) if scheme else root_uri
        return LocalStorage(path, instance, create=create)
    if scheme in ("webhdfs", "swebhdfs", "hdfs"):
        return _webhdfs(root_uri, scheme, instance, opts.webhdfs)
    if scheme == "s3":
        return _s3(root_uri, instance, opts.s3)
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


def _webhdfs(root_uri: str, scheme: str, instance: str, opts: WebHdfsOptions) -> Storage:
    from garmexport.storage.webhdfs import WebHdfsStorage

    hosts, path = _hosts(root_uri)
    http = "https" if scheme == "swebhdfs" else "http"
    port = opts.http_port
    urls = []
    for h in hosts:
        name, _, given = h.rpartition(":") if ":" in h else (h, "", "")
        if scheme == "hdfs" or not given:
            urls.append(f"{http}://{name}:{port}")  # hdfs:// carries the RPC port, not HTTP
        else:
            urls.append(f"{http}://{h}")
    return WebHdfsStorage(urls, path, instance, uri=root_uri.rstrip("/"), options=opts)


def _s3(root_uri: str, instance: str, opts: S3Options) -> Storage:
    from garmexport.storage.s3 import S3Storage

    parts = urlsplit(root_uri)
    if not parts.netloc:
        raise ConfigError(f"storage root {root_uri!r} names no bucket")
    env = os.environ
    opts = dataclasses.replace(
        opts, endpoint_url=opts.endpoint_url or env.get("AWS_ENDPOINT_URL") or None,
        region=opts.region or env.get("AWS_DEFAULT_REGION") or None)
    return S3Storage(parts.netloc, unquote(parts.path), instance, options=opts)
