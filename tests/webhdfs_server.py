"""A WebHDFS test double: a small HTTP server speaking the documented REST protocol.

THIS IS NOT HDFS. The WebHDFS backend is tested against a real NameNode and DataNodes
(Hadoop's MiniDFSCluster, ``tests/hdfs_cluster.py``, ``tox -e hdfs``); this server stands in
for them in the fast tiers of ``tox`` and for what a real cluster cannot be made to do on
demand (503s, connections dropped before or after the work, a request held unanswered).
Written from the WebHDFS REST API documentation (Apache Hadoop, "WebHDFS REST API") and
held to the real cluster's answers question by question
(``tests/hdfs/test_namenode_answers.py``). It keeps files in a local directory and
implements what garmexport and the ``hdfs`` client use:

- prefix ``/webhdfs/v1``; ops GETFILESTATUS, LISTSTATUS, MKDIRS, CREATE and APPEND (two
  steps: the "NameNode" answers 307 with a Location on the same server carrying
  ``datanode=true``, the client then sends the data there, plain or chunked), OPEN
  (``offset``/``length``, also through a 307; an offset at or past the end of a file that
  is not empty is the NameNode's IOException, with no redirect), RENAME (``{"boolean":
  false}`` when the source is missing, the target exists or its parent is missing; true
  onto itself; never overwrites; a target that is a directory receives the source inside
  it, as HDFS does), DELETE (``recursive``); a file being written is listed, with length
  0, from its DataNode step on;
- errors as ``{"RemoteException": {"exception", "javaClassName", "message"}}`` with the
  status codes of Hadoop's ExceptionHandler (404 FileNotFound, 403 IOException and its
  subclasses such as FileAlreadyExists and Standby, 400 IllegalArgument);
- ``fileId`` in FileStatus is the inode number, which a rename keeps, as in HDFS.

Namespace changes hold one lock, as the NameNode serialises them. :class:`Faults` lets a
test fail the next requests with 503, drop connections (before or after doing the work,
the latter makes an ambiguous answer), and give the answers a real cluster gives (checked
against Hadoop 3.5's NameNode and DataNodes, tests/hdfs/test_hdfs_faults.py): a standby
NameNode (StandbyException to every call but a CREATE, which it redirects as an active one
does: the DataNode's PUT is then refused), safe mode (SafeModeException to every change,
a CREATE's at the DataNode; reads answered), a space quota reached (the DataNode makes the
file, empty, then answers DSQuotaExceededException) and directories this user may not
change (AccessControlException). An error a DataNode answers carries the NameNode's Java
stack trace in its message, as there.
``spnego`` makes the NameNode calls require Kerberos (SPNEGO, ``Authorization: Negotiate``;
the token is checked by a function the test gives, e.g. a real GSSAPI acceptor). As a
secure NameNode does (checked against Hadoop 3.5's, tests/hdfs/test_hdfs_kerberos.py),
a negotiation is answered with a signed ``hadoop.auth`` cookie that lets the next calls in
without one until it expires (``cookie_validity_s``), and the redirects to the "DataNode"
carry a delegation token, without which the DataNode call is refused.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import os
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

PREFIX = "/webhdfs/v1"
Reply = Callable[[], None]  # writes the answer of an operation that is already done
_STATUS = {"FileNotFoundException": 404, "IllegalArgumentException": 400,
           "UnsupportedOperationException": 400}
#: what a DataNode's RemoteException message ends with: the NameNode's stack trace
_TRACE = ("\n\tat org.apache.hadoop.hdfs.server.namenode.FSNamesystem.startFile(FSNamesystem.java:2722)"
          "\n\tat org.apache.hadoop.ipc.Server$Handler.run(Server.java:3279)\n")
#: the ops that change the namespace (CREATE and APPEND: their DataNode step)
_WRITES = frozenset({"MKDIRS", "RENAME", "DELETE", "CREATE", "APPEND"})


class RemoteError(Exception):
    def __init__(self, exception: str, message: str) -> None:
        super().__init__(message)
        self.exception, self.message = exception, message


@dataclass
class Faults:
    """Fault injection; each rule applies to requests whose op matches (None = any)."""

    fail_503: list[tuple[str | None, int]] = field(default_factory=list)   # (op, count)
    drop: list[tuple[str | None, int, bool]] = field(default_factory=list)  # (op, count, after)
    standby: bool = False
    #: the NameNode in safe mode: every change refused, reads answered
    safe_mode: bool = False
    #: a space quota reached: a CREATE's data is refused once its (empty) file is made
    quota_exceeded: bool = False
    #: directories (HDFS paths) of another user, mode 755: nothing under them may change
    denied: list[str] = field(default_factory=list)
    #: (op, exempt): requests of op whose path and destination do not contain ``exempt``
    #: wait unanswered until ``released`` is set (a store that hangs)
    hold: list[tuple[str, str]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    requests: list[tuple[str, str, str]] = field(default_factory=list)      # (method, op, path)
    #: seconds every request waits before it is served: a NameNode's round trip and work,
    #: for benchmarks (0: as fast as this process answers)
    latency_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, count: int, op: str | None = None) -> None:
        with self.lock:
            self.fail_503.append((op, count))

    def drop_next(self, count: int, op: str | None = None, *, after: bool = False) -> None:
        """Close the connection without answering; ``after`` = once the op is done."""
        with self.lock:
            self.drop.append((op, count, after))

    def _take(self, rules: list, op: str) -> tuple | None:
        with self.lock:
            for i, rule in enumerate(rules):
                if rule[0] in (None, op):
                    if rule[1] <= 1:
                        del rules[i]
                    else:
                        rules[i] = (rule[0], rule[1] - 1, *rule[2:])
                    return rule
        return None


class WebHdfsServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, data_dir: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)  # HDFS's "/" always exists
        self.faults = Faults()
        self.ns_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: SPNEGO, when set: NameNode calls need ``Authorization: Negotiate <token>`` or the
        #: cookie of an earlier negotiation; the function accepts the token (raises if it
        #: is not valid) and names the client. DataNode calls (after the 307) need the
        #: delegation token of the redirect.
        self.spnego: Callable[[bytes], str] | None = None
        self.principals: list[str] = []  # who each authenticated call came from
        self.negotiations: list[str] = []  # who each SPNEGO negotiation came from
        self.cookie_validity_s = 36000.0  # hadoop.http.authentication.token.validity
        self.delegations: set[str] = set()  # tokens handed out in redirects
        self._secret = secrets.token_bytes(16)  # signs the cookies

    def cookie(self, principal: str) -> str:
        """The ``Set-Cookie`` value a negotiation by ``principal`` is answered with."""
        expires_ms = int((time.time() + self.cookie_validity_s) * 1000)
        fields = (f"u={principal.split('@')[0].split('/')[0]}&p={principal}&t=kerberos"
                  f"&e={expires_ms}")
        return f'hadoop.auth="{fields}&s={self._sign(fields)}"; Path=/; HttpOnly'

    def cookie_principal(self, header: str) -> str | None:
        """Whom a ``Cookie`` request header's valid, unexpired ``hadoop.auth`` names."""
        for part in header.split(";"):
            name, _, value = part.strip().partition("=")
            fields, _, signature = value.strip('"').rpartition("&s=")
            if name != "hadoop.auth" or not hmac.compare_digest(signature, self._sign(fields)):
                continue
            kv = dict(item.partition("=")[::2] for item in fields.split("&"))
            if int(kv.get("e") or 0) > time.time() * 1000:
                return kv.get("p")
        return None

    def _sign(self, fields: str) -> str:
        digest = hmac.new(self._secret, fields.encode(), hashlib.sha256).digest()
        return base64.b64encode(digest).decode()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> WebHdfsServer:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that dies (tests SIGKILL exporters) resets its connections: not worth a
        traceback on the test's output. Anything else is printed as usual."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)

    def local(self, hdfs_path: str) -> str:
        parts = [p for p in hdfs_path.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise RemoteError("IllegalArgumentException", f"Invalid path name {hdfs_path}")
        return os.path.join(self.data_dir, *parts)


def _file_status(full: str, suffix: str) -> dict:
    st = os.stat(full)
    is_dir = os.path.isdir(full)
    return {
        "accessTime": int(st.st_atime * 1000), "blockSize": 134217728, "childrenNum":
        len(os.listdir(full)) if is_dir else 0, "fileId": st.st_ino, "group": "supergroup",
        "length": 0 if is_dir else st.st_size, "modificationTime": int(st.st_mtime * 1000),
        "owner": "garmexport", "pathSuffix": suffix, "permission": "755" if is_dir else "644",
        "replication": 0 if is_dir else 3, "storagePolicy": 0,
        "type": "DIRECTORY" if is_dir else "FILE",
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as Jetty sets it on NameNode and DataNode sockets. With Nagle on, an
    # answer written as two segments (headers, then the body) on a keep-alive connection
    # holds the body back until the client ACKs the headers, and the client delays that
    # ACK by up to 40 ms: every call with a body took ~45 ms instead of ~1 ms, so after an
    # outage the backlog of publishes drained 40x slower than against a real NameNode.
    disable_nagle_algorithm = True
    server: WebHdfsServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass  # keep test output quiet

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- plumbing ------------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              ctype: str = "application/json") -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        cookie = self.__dict__.pop("_set_cookie", None)  # this request's negotiation's
        if cookie:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, obj: dict, status: int = 200) -> None:
        self._send(status, json.dumps(obj).encode())

    def _error(self, exc: RemoteError) -> None:
        java = {"FileNotFoundException": "java.io", "IOException": "java.io",
                "StandbyException": "org.apache.hadoop.ipc",
                "AccessControlException": "org.apache.hadoop.security",
                "FileAlreadyExistsException": "org.apache.hadoop.fs",
                "ParentNotDirectoryException": "org.apache.hadoop.fs",
                "PathIsNotEmptyDirectoryException": "org.apache.hadoop.fs",
                "SafeModeException": "org.apache.hadoop.hdfs.server.namenode",
                "DSQuotaExceededException": "org.apache.hadoop.hdfs.protocol",
                "IllegalArgumentException": "java.lang"}.get(exc.exception, "org.apache.hadoop")
        self._json({"RemoteException": {"exception": exc.exception, "message": exc.message,
                                        "javaClassName": f"{java}.{exc.exception}"}},
                   _STATUS.get(exc.exception, 403))

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        op = q.get("op", "").upper()
        # a CREATE's data is read by its DataNode step once the (empty) file is in the
        # namespace, as HDFS lists a file being written (length 0) to other clients
        streamed = method == "PUT" and op == "CREATE" and q.get("datanode") == "true"
        self._body_read = not streamed
        body = self._body() if method in ("PUT", "POST") and not streamed else b""
        faults = self.server.faults
        with faults.lock:
            faults.requests.append((method, op, url.path))
        if faults.latency_s:
            time.sleep(faults.latency_s)
        if self.server.spnego is not None and not self._authenticated(q):
            return
        where = url.path + " " + q.get("destination", "")
        with faults.lock:
            held = any(op == o and exempt not in where for o, exempt in faults.hold)
        if held:
            faults.released.wait(600)
        drop = faults._take(faults.drop, op)
        if drop is not None and not drop[2]:
            self.close_connection = True
            return
        if faults._take(faults.fail_503, op) is not None:
            self._send(503, b"Service Unavailable", ctype="text/plain")
            return
        if not url.path.startswith(PREFIX):
            self._send(404, b"not webhdfs", ctype="text/plain")
            return
        hdfs_path = unquote(url.path[len(PREFIX):]) or "/"
        datanode = q.get("datanode") == "true"
        try:
            self._refuse(op, hdfs_path, q, datanode)
            handler = getattr(self, f"_op_{method}_{op}", None)
            if handler is None:
                raise RemoteError("UnsupportedOperationException",
                                  f"Invalid value for webhdfs parameter \"op\": {op}")
            reply = handler(hdfs_path, q, body)
        except RemoteError as exc:
            if datanode:  # a DataNode passes on the NameNode's trace
                exc = RemoteError(exc.exception, exc.message + _TRACE)
            reply = functools.partial(self._error, exc)
        if drop is not None:  # the work is done, the answer is lost: an ambiguous call
            self.close_connection = True
            return
        if not self._body_read:  # refused before its data was read: drop the rest
            self.close_connection = True
        reply()

    def _refuse(self, op: str, path: str, q: dict[str, str], datanode: bool) -> None:
        """Raise what a standby, a NameNode in safe mode or a denied directory answers. A
        CREATE or APPEND reaches the namespace at its DataNode step: the NameNode's first
        step redirects it whatever its state."""
        faults = self.server.faults
        if op in ("CREATE", "APPEND") and not datanode:
            return
        change = op in _WRITES
        if faults.standby:
            category = "WRITE" if change else "READ"
            raise RemoteError("StandbyException", f"Operation category {category} is not "
                              "supported in state standby. Visit https://s.apache.org/sbnn-error")
        if not change:
            return
        if faults.safe_mode:
            raise RemoteError("SafeModeException", f"Cannot {op.lower()} {path}. Name node is "
                              "in safe mode.\nIt was turned on manually. Use \"hdfs dfsadmin "
                              "-safemode leave\" to turn safe mode off.")
        for where in (path, q.get("destination", "")):
            for top in faults.denied:
                if where == top or where.startswith(top.rstrip("/") + "/"):
                    raise RemoteError("AccessControlException", "Permission denied: user="
                                      f"{q.get('user.name', '')}, access=WRITE, "
                                      f"inode=\"{top}\":bob:supergroup:drwxr-xr-x")

    def _authenticated(self, q: dict[str, str]) -> bool:
        """A DataNode call needs the delegation token of its redirect, a NameNode call the
        cookie of an earlier negotiation or a negotiation; on failure answer and say False."""
        if "datanode" in q:
            if q.get("delegation") in self.server.delegations:
                return True
            self._error(RemoteError("InvalidToken", "no delegation token of this NameNode "
                                    "in the request"))
            return False
        principal = self.server.cookie_principal(self.headers.get("Cookie", ""))
        if principal is None:
            return self._negotiate()
        with self.server.faults.lock:
            self.server.principals.append(principal)
        return True

    def _negotiate(self) -> bool:
        """Check the SPNEGO token; on failure answer 401 (none) or 403 (bad) and say False;
        on success the answer will set the cookie."""
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        if scheme != "Negotiate" or not token:
            self._send(401, b"Authentication required", {"WWW-Authenticate": "Negotiate"},
                       ctype="text/plain")
            return False
        try:
            principal = self.server.spnego(base64.b64decode(token))  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - any refusal is a 403, as on a NameNode
            self._send(403, f"GSSException: {exc}".encode(), ctype="text/plain")
            return False
        with self.server.faults.lock:
            self.server.principals.append(principal)
            self.server.negotiations.append(principal)
        self._set_cookie = self.server.cookie(principal)
        return True

    def _redirect(self, q: dict[str, str]) -> Reply:
        params = dict(q, datanode="true")
        if self.server.spnego is not None:
            params["delegation"] = secrets.token_urlsafe(16)
            with self.server.faults.lock:
                self.server.delegations.add(params["delegation"])
        loc = f"{self.server.url}{urlsplit(self.path).path}?{urlencode(params)}"  # still quoted
        return lambda: self._send(307, b"", {"Location": loc})

    # -- operations: each returns a thunk that writes the answer --------------------------

    def _op_GET_GETFILESTATUS(self, path: str, q: dict, body: bytes) -> Reply:
        full = self.server.local(path)
        if not os.path.exists(full):
            raise RemoteError("FileNotFoundException", f"File does not exist: {path}")
        st = _file_status(full, "")
        return lambda: self._json({"FileStatus": st})

    def _op_GET_LISTSTATUS(self, path: str, q: dict, body: bytes) -> Reply:
        full = self.server.local(path)
        if not os.path.exists(full):
            raise RemoteError("FileNotFoundException", f"File {path} does not exist.")
        if os.path.isdir(full):
            items = []
            for name in sorted(os.listdir(full)):
                try:
                    items.append(_file_status(os.path.join(full, name), name))
                except FileNotFoundError:
                    pass
        else:
            items = [_file_status(full, "")]
        return lambda: self._json({"FileStatuses": {"FileStatus": items}})

    def _op_PUT_MKDIRS(self, path: str, q: dict, body: bytes) -> Reply:
        with self.server.ns_lock:
            full = self.server.local(path)
            probe = full
            while probe != self.server.data_dir and not os.path.exists(probe):
                probe = os.path.dirname(probe)
            if not os.path.isdir(probe):
                raise RemoteError("ParentNotDirectoryException", f"{probe} is not a directory")
            os.makedirs(full, exist_ok=True)
        return lambda: self._json({"boolean": True})

    def _op_PUT_CREATE(self, path: str, q: dict, body: bytes) -> Reply:
        if q.get("datanode") != "true":
            return self._redirect(q)
        overwrite = q.get("overwrite", "false").lower() == "true"
        with self.server.ns_lock:
            full = self.server.local(path)
            if os.path.isdir(full):
                raise RemoteError("FileAlreadyExistsException", f"{path} already exists as a directory")
            if os.path.exists(full) and not overwrite:
                raise RemoteError("FileAlreadyExistsException", f"{path} for client already exists")
            try:
                os.makedirs(os.path.dirname(full), exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise RemoteError("ParentNotDirectoryException", f"parent of {path}") from None
            with open(full, "wb"):
                pass  # in the namespace now, empty, while its data comes
            if self.server.faults.quota_exceeded:  # made, empty; its first block refused
                raise RemoteError("DSQuotaExceededException", "The DiskSpace quota of / is "
                                  "exceeded: quota = 1048576 B = 1 MB but diskspace "
                                  "consumed = 268435456 B = 256 MB")
        data = self._body()
        self._body_read = True
        with open(full, "ab") as f:
            f.write(data)
        loc = f"hdfs://127.0.0.1{quote(path)}"
        return lambda: self._send(201, b"", {"Location": loc})

    def _op_POST_APPEND(self, path: str, q: dict, body: bytes) -> Reply:
        if q.get("datanode") != "true":
            return self._redirect(q)
        with self.server.ns_lock:
            full = self.server.local(path)
            if not os.path.isfile(full):
                raise RemoteError("FileNotFoundException", f"File {path} not found.")
            with open(full, "ab") as f:
                f.write(body)
        return lambda: self._send(200)

    def _op_GET_OPEN(self, path: str, q: dict, body: bytes) -> Reply:
        if q.get("datanode") != "true":
            # the NameNode refuses an offset past the end itself, before any redirect
            full = self.server.local(path)
            size = os.path.getsize(full) if os.path.isfile(full) else 0
            offset = int(q.get("offset") or 0)
            if offset < 0 or (size > 0 and offset >= size):
                raise RemoteError("IOException", f"Offset={offset} out of the range "
                                  f"[0, {size}); OPEN, path={path}")
            return self._redirect(q)
        full = self.server.local(path)
        if not os.path.isfile(full):
            raise RemoteError("FileNotFoundException", f"File does not exist: {path}")
        offset = int(q.get("offset") or 0)
        size = os.path.getsize(full)
        if offset > size:
            raise RemoteError("IOException", f"Offset={offset} out of the range [0, {size}]")
        length = q.get("length")
        with open(full, "rb") as f:
            f.seek(offset)
            data = f.read() if length in (None, "") else f.read(int(length))
        return lambda: self._send(200, data, ctype="application/octet-stream")

    def _op_PUT_RENAME(self, path: str, q: dict, body: bytes) -> Reply:
        dest = q.get("destination", "")
        if not dest.startswith("/"):
            raise RemoteError("IllegalArgumentException", f"Invalid destination {dest!r}")
        with self.server.ns_lock:
            src, dst = self.server.local(path), self.server.local(dest)
            if os.path.isdir(dst):
                dst = os.path.join(dst, os.path.basename(src))
            ok = (os.path.exists(src) and (not os.path.exists(dst) or dst == src)
                  and os.path.isdir(os.path.dirname(dst)) and src != self.server.data_dir)
            if ok:
                os.rename(src, dst)  # the lock makes check-and-rename atomic here
        return lambda: self._json({"boolean": ok})

    def _op_DELETE_DELETE(self, path: str, q: dict, body: bytes) -> Reply:
        recursive = q.get("recursive", "false").lower() == "true"
        with self.server.ns_lock:
            full = self.server.local(path)
            if not os.path.exists(full):
                ok = False
            elif os.path.isdir(full):
                if os.listdir(full) and not recursive:
                    raise RemoteError("PathIsNotEmptyDirectoryException",
                                      f"`{path} is non empty': Directory is not empty")
                shutil.rmtree(full)
                ok = True
            else:
                os.unlink(full)
                ok = True
        return lambda: self._json({"boolean": ok})
