"""Fixtures giving every storage backend behind one parameter.

``storage_backend`` is parametrised over ``local``, ``webhdfs`` (against the WebHDFS test
double in ``tests/webhdfs_server.py``) and ``s3`` (a real SeaweedFS server, started once
per session; skipped with the reason when the ``weed`` binary cannot start). It yields a
:class:`Backend` ``(root_uri, options, storage)``: ``open_storage(root_uri, instance,
options)`` in another process reaches the same root, so end-to-end tests can hand the
pair to the exporter they start. Each test gets a fresh, empty root.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from garmexport.storage.base import Storage
from garmexport.storage.open import open_storage
from tests.seaweed import Seaweed
from tests.webhdfs_server import WebHdfsServer

BACKENDS = ("local", "webhdfs", "s3")


class Backend(NamedTuple):
    root_uri: str
    options: dict[str, str]
    storage: Storage


@pytest.fixture
def webhdfs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebHdfsServer]:
    """A WebHDFS test double over a fresh directory."""
    server = WebHdfsServer(str(tmp_path_factory.mktemp("webhdfs"))).start()
    try:
        yield server
    finally:
        server.stop()


def s3_options(server: Seaweed) -> dict[str, str]:
    return {"s3.endpoint": server.endpoint, "s3.access_key": server.access_key,
            "s3.secret_key": server.secret_key, "s3.region": "us-east-1"}


def backend_root(request: pytest.FixtureRequest, name: str,
                 tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """(root_uri, options) of a fresh, empty root on backend ``name``."""
    if name == "local":
        return str(tmp_path_factory.mktemp("out")), {}
    if name == "webhdfs":
        server = request.getfixturevalue("webhdfs_server")
        return f"webhdfs://127.0.0.1:{server.server_address[1]}/out", {"webhdfs.user": "garm"}
    if name == "s3":
        server = request.getfixturevalue("seaweed")
        return f"s3://{server.bucket}/{uuid.uuid4().hex}", s3_options(server)
    raise ValueError(name)


@pytest.fixture(params=BACKENDS)
def storage_backend(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    root_uri, options = backend_root(request, request.param, tmp_path_factory)
    storage = open_storage(root_uri, "inst-a", options)
    try:
        yield Backend(root_uri, options, storage)
    finally:
        storage.close()


@pytest.fixture
def storage(storage_backend: Backend) -> Storage:
    return storage_backend.storage
