"""Fixtures giving every storage backend behind one parameter.

``storage_backend`` is parametrised over ``local``, ``webhdfs`` (against the WebHDFS test
double in ``tests/webhdfs_server.py``), ``hdfs`` (WebHDFS against a real HDFS, Hadoop's
MiniDFSCluster started once per session: ``tox -e hdfs``, skipped elsewhere) and ``s3`` (a
real SeaweedFS server, started once per session; skipped with the reason when the ``weed``
binary cannot start). It yields a
:class:`Backend` ``(root_uri, output, storage)``: ``output`` holds the ``[output]`` keys
the root needs (JSON-able values), and ``open_storage(root_uri, instance,
options(output))`` in another process reaches the same root, so end-to-end tests can hand
the pair to the exporter they start. Each test gets a fresh, empty root.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from garmexport.settings.config import OutputConfig
from garmexport.storage.base import Storage
from garmexport.storage.open import open_storage
from garmexport.storage.options import StorageOptions, from_output
from tests.seaweed import Seaweed
from tests.webhdfs_server import WebHdfsServer

BACKENDS = ("local", "webhdfs", "hdfs", "s3")


class Backend(NamedTuple):
    root_uri: str
    output: dict[str, object]
    storage: Storage

    @property
    def options(self) -> StorageOptions:
        return options(self.output)


def options(output: dict[str, object]) -> StorageOptions:
    """The backend options of an ``[output]`` section with the keys ``output``."""
    return from_output(OutputConfig(**output))  # type: ignore[arg-type]


@pytest.fixture
def webhdfs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebHdfsServer]:
    """A WebHDFS test double over a fresh directory."""
    server = WebHdfsServer(str(tmp_path_factory.mktemp("webhdfs"))).start()
    try:
        yield server
    finally:
        server.stop()


def s3_output(server: Seaweed) -> dict[str, object]:
    return {"s3_endpoint_url": server.endpoint, "s3_access_key_id": server.access_key,
            "s3_secret_access_key": server.secret_key, "s3_region": "us-east-1"}


def backend_root(request: pytest.FixtureRequest, name: str,
                 tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, object]]:
    """(root_uri, [output] keys) of a fresh, empty root on backend ``name``."""
    if name == "local":
        return str(tmp_path_factory.mktemp("out")), {}
    if name == "webhdfs":
        server = request.getfixturevalue("webhdfs_server")
        return f"webhdfs://127.0.0.1:{server.server_address[1]}/out", {"hdfs_user": "garm"}
    if name == "hdfs":
        cluster = request.getfixturevalue("real_hdfs")
        root = f"/t/{uuid.uuid4().hex}"
        cluster.mkdir(root, "garm")
        return cluster.webhdfs_uri(root + "/out"), {"hdfs_user": "garm"}
    if name == "s3":
        server = request.getfixturevalue("seaweed")
        return f"s3://{server.bucket}/{uuid.uuid4().hex}", s3_output(server)
    raise ValueError(name)


@pytest.fixture(params=BACKENDS)
def storage_backend(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    root_uri, output = backend_root(request, request.param, tmp_path_factory)
    storage = open_storage(root_uri, "inst-a", options(output))
    try:
        yield Backend(root_uri, output, storage)
    finally:
        storage.close()


@pytest.fixture
def storage(storage_backend: Backend) -> Storage:
    return storage_backend.storage
