"""The WebHDFS double answers as Hadoop's NameNode and DataNodes do, question by question.

``tests/webhdfs_server.py`` stands in for HDFS wherever a real cluster cannot be made to
fail on demand (dropped connections, lost answers, 503s): the fast tests in ``tox`` rest
on it. Here the same raw WebHDFS requests go to the real cluster and to the double, and
their answers must agree in what the client reads: the status, the redirect, the
``boolean`` of a RENAME or DELETE, the ``exception`` and ``javaClassName`` of an error (not
its message text, which the client only passes on), and what another client lists while
a file is being written. A difference is a finding about the double (or the client's
reading of HDFS), never to be papered over here.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.hdfs.conftest import USER, fresh_root
from tests.hdfs_cluster import MiniHdfs
from tests.webhdfs_server import WebHdfsServer


def _shape(res: requests.Response) -> tuple[Any, ...]:
    """What the client reads of an answer."""
    try:
        body = res.json()
    except ValueError:
        body = None
    redirected = res.status_code == 307 and bool(res.headers.get("location"))
    if isinstance(body, dict) and "RemoteException" in body:
        remote = body["RemoteException"]
        return res.status_code, remote.get("exception"), remote.get("javaClassName")
    if isinstance(body, dict) and "boolean" in body:
        return res.status_code, body["boolean"]
    return res.status_code, "redirect" if redirected else None


def answers(base: str, root: str) -> dict[str, tuple[Any, ...]]:
    """The shapes of the answers to the questions, in order, under directory ``root``."""
    session = requests.Session()

    def call(method: str, path: str, op: str, **params: str) -> requests.Response:
        return session.request(method, f"{base}/webhdfs/v1{root}{path}",
                               params={"op": op, "user.name": USER, **params},
                               allow_redirects=False)

    def create(path: str, data: Any, **params: str) -> tuple[requests.Response,
                                                              requests.Response | None]:
        first = call("PUT", path, "CREATE", **params)
        if first.status_code != 307:
            return first, None
        return first, session.put(first.headers["location"], data=data)

    out: dict[str, tuple[Any, ...]] = {}
    out["MKDIRS"] = _shape(call("PUT", "/d", "MKDIRS"))
    nn, dn = create("/d/f", b"hello", overwrite="false")
    out["CREATE"] = _shape(nn)
    out["CREATE, its DataNode step"] = (dn.status_code,) if dn is not None else ()
    nn, dn = create("/d/f", b"again", overwrite="false")
    out["CREATE overwrite=false of an existing file"] = _shape(nn)
    out["... its DataNode step"] = _shape(dn) if dn is not None else ()
    create("/d/g", b"other file", overwrite="false")
    out["RENAME onto another file"] = _shape(call("PUT", "/d/g", "RENAME",
                                                  destination=f"{root}/d/f"))
    out["RENAME onto itself"] = _shape(call("PUT", "/d/f", "RENAME", destination=f"{root}/d/f"))
    out["RENAME of a missing file"] = _shape(call("PUT", "/d/nope", "RENAME",
                                                  destination=f"{root}/d/z"))
    out["RENAME into a missing directory"] = _shape(call("PUT", "/d/g", "RENAME",
                                                         destination=f"{root}/nodir/z"))
    out["DELETE of a missing file"] = _shape(call("DELETE", "/d/nope", "DELETE",
                                                  recursive="false"))
    out["DELETE of a directory not empty"] = _shape(call("DELETE", "/d", "DELETE",
                                                         recursive="false"))
    out["GETFILESTATUS of a missing file"] = _shape(call("GET", "/d/nope", "GETFILESTATUS"))
    listed = call("GET", "/d/f", "LISTSTATUS")
    out["LISTSTATUS of a file"] = (listed.status_code, [
        s["pathSuffix"] for s in listed.json()["FileStatuses"]["FileStatus"]])
    out["LISTSTATUS of a missing directory"] = _shape(call("GET", "/nope", "LISTSTATUS"))
    out["MKDIRS under a file"] = _shape(call("PUT", "/d/f/sub", "MKDIRS"))
    out["OPEN at an offset past the end"] = _shape(call("GET", "/d/f", "OPEN", offset="10"))

    # a file being written (a chunked upload, paused halfway), as another client lists it
    first = call("PUT", "/d/slow", "CREATE", overwrite="false")
    halfway = threading.Event()

    def body() -> Iterator[bytes]:
        yield b"a" * 1000
        halfway.set()
        time.sleep(1.5)
        yield b"b" * 1000

    upload = threading.Thread(target=lambda: requests.put(first.headers["location"],
                                                          data=body()))
    upload.start()
    halfway.wait(10)
    time.sleep(0.5)
    during = call("GET", "/d", "LISTSTATUS").json()["FileStatuses"]["FileStatus"]
    upload.join(30)
    out["a file being written, listed"] = tuple(
        (s["pathSuffix"], s["length"]) for s in during if s["pathSuffix"] == "slow")
    after = call("GET", "/d/slow", "GETFILESTATUS").json()["FileStatus"]
    out["the same file once written"] = (after["length"],)
    session.close()
    return out


@pytest.fixture
def double() -> Iterator[WebHdfsServer]:
    server = WebHdfsServer(tempfile.mkdtemp(prefix="garm-webhdfs-")).start()
    try:
        yield server
    finally:
        server.stop()


def test_the_double_answers_every_question_as_the_namenode_does(
        real_hdfs: MiniHdfs, double: WebHdfsServer) -> None:
    root = fresh_root(real_hdfs, "q")
    real_hdfs.mkdir(root.path, USER)
    real = answers(f"http://127.0.0.1:{real_hdfs.http_ports[0]}", root.path)
    ours = answers(double.url, "/q")
    different = {q: (real[q], ours.get(q)) for q in real if real[q] != ours.get(q)}
    assert not different, "\n".join(f"{q}: real {r}, double {d}"
                                    for q, (r, d) in different.items())
