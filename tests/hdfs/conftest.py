"""Fixtures of the real-HDFS tier (``tox -e hdfs``; skipped in ``tox``).

``real_hdfs`` (tests/conftest.py) is the session's cluster: one NameNode, two DataNodes,
WebHDFS on. ``hdfs_root`` gives a test a fresh directory on it, owned by the test user
``garm`` (the NameNode enforces permissions), and the ``webhdfs://`` root under it. Tests
that break a cluster (a NameNode stopped, a failover, a quota, safe mode) start their own
with :func:`tests.hdfs_cluster.mini_hdfs`, so the shared one stays whole.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from tests.hdfs_cluster import MiniHdfs

USER = "garm"


@dataclass(frozen=True)
class HdfsRoot:
    cluster: MiniHdfs
    path: str  # the absolute HDFS path of the output root
    uri: str  # webhdfs://127.0.0.1:PORT/path

    @property
    def hdfs_uri(self) -> str:
        """The same root as Spark's Hadoop file system reads it (RPC)."""
        return self.cluster.hdfs_uri(self.path)


def fresh_root(cluster: MiniHdfs, name: str = "out") -> HdfsRoot:
    base = f"/t/{uuid.uuid4().hex[:12]}"
    cluster.mkdir(base, USER)
    path = f"{base}/{name}"
    return HdfsRoot(cluster, path, cluster.webhdfs_uri(path))


@pytest.fixture
def hdfs_root(real_hdfs: MiniHdfs) -> HdfsRoot:
    return fresh_root(real_hdfs)
