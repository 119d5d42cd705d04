"""HDFS backend over WebHDFS (the ``hdfs`` package's client).

How it keeps the guarantees of :mod:`garmexport.storage.base`:

- stage: a two-step CREATE (``overwrite=false``) of ``<root>/_tmp/<instance>/<uuid>``;
  its ``fileId`` (the inode id, which a rename keeps) goes into the Staged handle as
  ``"<fileId>:<temp path>"``. A failed attempt is retried under a fresh name (the first
  name is deleted on a best-effort basis; ``gc_temp`` removes what stays).
- publish: RENAME; when it answers false, MKDIRS of the parent and RENAME once more.
  HDFS RENAME makes no parents (a missing one is a false answer, as a taken name is),
  and the parent exists for every file of a directory but its first, so it is made
  only then, not before every RENAME: a data file's stage and publish ask the NameNode
  three times (CREATE, GETFILESTATUS, RENAME), not four. HDFS rename never replaces an
  existing file: it answers ``{"boolean": false}``, and then (or when the answer is lost: dropped
  connection, 5xx) the outcome is settled from the namespace: the target holds our
  fileId -> done; the target exists otherwise -> PublishConflict; the target is missing
  -> StorageError (retryable, the staged file is kept). Servers that omit ``fileId``
  fall back to "temp gone and target has our size", which is weaker. The NameNode logs
  the rename to its edit log before answering, so a returned publish is durable.
- an empty file (an intent) has no bytes that could be seen torn, so ``put_exclusive``
  creates it in place: a CREATE with ``overwrite=false`` of its final name, which HDFS
  refuses when the name exists (FileAlreadyExistsException: PublishConflict) and which
  makes missing parents; the NameNode is asked once instead of three times (no
  GETFILESTATUS, no RENAME), and nothing is left under ``_tmp``. An unanswered attempt
  is repeated; if the repeat finds the name taken, an empty file there is settled as
  done (it holds exactly these bytes, whoever made it), anything else is a conflict.
- idempotent calls (GETFILESTATUS, LISTSTATUS, OPEN, MKDIRS, DELETE) are retried inside
  the backend on connection errors and 5xx, briefly (``output.hdfs_attempts``, 3, paced
  by ``hdfs_retry_initial_s``/``hdfs_retry_max_s``: 0.1 s then 0.2 s apart by default):
  a blip is absorbed here, a longer outage reaches the caller within about a second,
  and the exporter's own back-off (``storage.retry_*``) paces the retries from there.
  In-call retries do not nest: the cleanup of a failed stage is one best-effort
  DELETE. RENAME is never repeated after a lost answer (only after a false one, its
  parent made). Every call has a socket timeout (``hdfs_timeout_s``, per
  connect and per read), so a server that stops answering cannot block the writer for
  longer than that.
- HA: several NameNode URLs go to the ``hdfs`` client, which tries the next one on a
  connection error or a StandbyException/RetriableException answer. A standby redirects
  a CREATE all the same (only the DataNode's PUT is refused, with StandbyException): the
  client then moves to the next NameNode itself and tries again there.
- refusals: a DataNode's answer carries the NameNode's Java stack trace in its message,
  which is cut to its first lines. AccessControlException is StorageDenied (a root this
  user may not write: a configuration error at start-up, :mod:`.root_check`), as is a
  secure NameNode's refusal of the principal acting for ``user`` (doas); quotas
  (DSQuotaExceededException, from the DataNode, once the file is made) and safe mode are
  StorageErrors the exporter retries; the file a refused CREATE made is deleted.
- HTTPS (``swebhdfs://``): the NameNodes' and DataNodes' certificates are checked against
  ``output.hdfs_ca_file`` (PEM), else against the certifi bundle requests ships (or
  REQUESTS_CA_BUNDLE, which requests reads from the environment; a CA file given here
  wins over it). A certificate that does not verify is no outage a retry outlasts: it is
  a ConfigError naming the root and the key, at once, from the NameNode or the DataNode
  that showed it.
- Kerberos (``output.hdfs_kerberos``): SPNEGO on every request from a ticket that
  :mod:`garmexport.storage.kerberos` keeps fresh; ``user`` is then a proxy user (``doas``).
  The ``hdfs`` package's own KerberosClient is not used: it needs requests-kerberos and
  the process-wide default ticket cache.

Tested against a real HDFS (Hadoop 3.5's NameNodes and DataNodes: tests/hdfs/, among them
the faults of test_hdfs_faults.py) and against the WebHDFS test double in
``tests/webhdfs_server.py``, which gives the real cluster's answers to those faults and
alone has dropped connections, lost answers and 503s.
"""

from __future__ import annotations

import http.client
import logging
import os
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests
from hdfs import Client, HdfsError, InsecureClient

from garmexport.settings import extras
from garmexport.errors import ConfigError, PublishConflict, StorageDenied, StorageError
from garmexport.storage import paths
from garmexport.storage.base import (
    ROOT_DIRECTORY, ROOT_MISSING, ROOT_NOT_DIRECTORY, Entry, Staged, Storage,
)
from garmexport.storage.kerberos import SpnegoAuth, TicketKeeper, refused_without_kerberos
from garmexport.storage.options import WebHdfsOptions
from garmexport.storage.retry import retry

log = logging.getLogger(__name__)
E = TypeVar("E", bound=BaseException)
# the hdfs package logs "Instantiated <InsecureClient(url=...)>." at INFO for every client
# made: a line that is no event of garmexport's (a start-up error was no longer one line)
logging.getLogger("hdfs").setLevel(logging.WARNING)

#: a DataNode's answer to a CREATE's data that says the NameNode it was redirected from is
#: not the active one (or not yet): another NameNode, or a later try, may take it
_ASK_ANOTHER_NAMENODE = frozenset({"StandbyException", "RetriableException"})
#: a DataNode's answer that means the NameNode refused to make the file: nothing to remove
#: (and its DELETE would be refused too). Every other refusal may come once the file exists:
#: a DSQuotaExceededException refuses its first block, and a failover or safe mode that
#: begins while the data is written leaves the file made by then, empty
_REFUSED_BEFORE_CREATE = frozenset({"AccessControlException"})


class _Transient(StorageError):
    """Connection error, 5xx or no active NameNode: the call may succeed if repeated."""


class _Taken(StorageError):
    """A CREATE found its name taken (FileAlreadyExistsException)."""


class _Session(requests.Session):
    """A requests Session whose ``verify`` is sent with every request: requests lets
    REQUESTS_CA_BUNDLE override a session's ``verify``, not a request's (psf/requests#3829),
    and the hdfs client sets none per request."""

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("verify", self.verify)
        return super().request(*args, **kwargs)


class WebHdfsStorage(Storage):
    """Output root ``root`` (an absolute HDFS path) reached through ``urls`` (HA list)."""

    def __init__(self, urls: Sequence[str], root: str, instance: str, *, uri: str,
                 options: WebHdfsOptions, sleep: Callable[[float], None] = time.sleep) -> None:
        self.uri, self.instance = uri, instance
        self.root = "/" + root.strip("/")
        self._retry = dict(attempts=options.attempts, initial_s=options.retry_initial_s,
                           max_s=options.retry_max_s, sleep=sleep, on_retry=self._log_retry,
                           retry_on=(_Transient,))
        self._keeper: TicketKeeper | None = None
        if options.ca_file and not os.path.isfile(options.ca_file):
            raise ConfigError(f"output.hdfs_ca_file = {options.ca_file!r}: no such file (the "
                              "PEM CA certificates of the swebhdfs:// root)")
        if options.kerberos is None:
            plain = _session(options.ca_file)
            plain.hooks["response"].append(refused_without_kerberos)
            self._client: Any = InsecureClient(";".join(urls), user=options.user,
                                               timeout=options.timeout_s, session=plain)
            return
        why = extras.missing("kerberos")
        if why:
            raise ConfigError(f"output.hdfs_kerberos = true: {why}")
        self._keeper = TicketKeeper(options.kerberos)
        session = _session(options.ca_file)
        session.auth = SpnegoAuth(self._keeper)
        self._client = Client(";".join(urls), proxy=options.user, timeout=options.timeout_s,
                              session=session)

    def _abs(self, path: str, *, allow_root: bool = False) -> str:
        rel = paths.clean(path, allow_root=allow_root)
        return f"{self.root.rstrip('/')}/{rel}" if rel else self.root

    def _unanswered(self, what: str, exc: BaseException) -> Exception:
        """The error of a call that got no answer: _Transient, or ConfigError naming the
        root when the server's TLS certificate did not verify (a retry would meet the same
        certificate)."""
        untrusted = _cert_verify_error(exc)
        if untrusted is None:
            return _Transient(f"{what}: {exc}")
        host = urlsplit(str(getattr(getattr(exc, "request", None), "url", "") or "")).netloc
        return ConfigError(
            f"output.root = {self.uri!r}: the TLS certificate of {host or 'its server'} is not "
            f"trusted ({untrusted.verify_message or untrusted}): name the CA that signed it "
            "in output.hdfs_ca_file (GARMEXPORT_OUTPUT_HDFS_CA_FILE), a PEM file")

    @staticmethod
    def _log_retry(n: int, exc: BaseException, delay_s: float) -> None:
        log.warning("webhdfs retry %d in %.2fs after: %s", n, delay_s, exc)

    # -- one HTTP call ---------------------------------------------------------------------

    def _once(self, method: Callable[..., requests.Response], full: str,
              **params: Any) -> requests.Response:
        """One call through the hdfs client; body read; _Transient on 5xx or no answer."""
        try:
            res = method(full, strict=False, **params)
            try:
                res.content  # noqa: B018 - read the (streamed) body now, inside the try
            finally:
                res.close()
        except (requests.RequestException, HdfsError) as exc:
            raise self._unanswered(f"{_op(method)} {full}", exc) from exc
        if res.status_code >= 500:
            raise _Transient(f"{_op(method)} {full}: HTTP {res.status_code}")
        return res

    def _call(self, method: Callable[..., requests.Response], full: str,
              **params: Any) -> requests.Response:
        """An idempotent call, retried; FileNotFoundError on 404, StorageError on 4xx."""
        res = retry(lambda: self._once(method, full, **params), **self._retry)
        if res.status_code == 404:
            raise FileNotFoundError(full)
        if res.status_code >= 400:
            raise _refusal(f"{_op(method)} {full}", res)
        return res

    def _status(self, full: str) -> dict[str, Any] | None:
        try:
            return self._call(self._client._get_file_status, full).json()["FileStatus"]
        except FileNotFoundError:
            return None

    # -- Storage -----------------------------------------------------------------------------

    def list(self, path: str) -> list[Entry]:
        try:
            res = self._call(self._client._list_status, self._abs(path, allow_root=True))
        except FileNotFoundError:
            return []
        return [Entry(s["pathSuffix"], s["type"] == "DIRECTORY", int(s.get("length", 0)),
                      s.get("modificationTime", 0) / 1000.0)
                for s in res.json()["FileStatuses"]["FileStatus"]
                if s["pathSuffix"]]  # a file answers with itself under an empty suffix

    def read(self, path: str) -> bytes:
        return self._call(self._client._open, self._abs(path)).content

    def read_tail(self, path: str, nbytes: int,
                  size: int | None = None) -> tuple[bytes, int]:
        full = self._abs(path)
        if size is None:  # OPEN takes an offset from the start: the size comes first
            st = self._status(full)
            if st is None or st["type"] != "FILE":
                raise FileNotFoundError(full)
            size = int(st["length"])
        want = min(max(0, nbytes), size)
        if want == 0:
            return b"", size
        data = self._call(self._client._open, full, offset=size - want, length=want).content
        return data, size

    def exists(self, path: str) -> bool:
        st = self._status(self._abs(path))
        return st is not None and st["type"] == "FILE"

    def root_state(self) -> str:
        st = self._status(self.root)
        if st is None:
            return ROOT_MISSING
        return ROOT_DIRECTORY if st["type"] == "DIRECTORY" else ROOT_NOT_DIRECTORY

    def create_root(self) -> str:
        self._call(self._client._mkdirs, self.root)
        return "created the directory"

    def stage(self, data: bytes) -> Staged:
        return retry(lambda: self._stage_once(data), **self._retry)

    def _stage_once(self, data: bytes) -> Staged:
        rel = paths.new_tmp_path(self.instance)
        full = self._abs(rel)
        self._write(full, data, remove_on_failure=True)
        try:
            st = self._status(full)
            if st is None or int(st["length"]) != len(data):
                raise StorageError(f"staged {full} is missing or has the wrong size")
        except StorageError:
            self._delete_quietly(full)
            raise
        return Staged(f"{st.get('fileId', '')}:{rel}", len(data))

    def _write(self, full: str, data: bytes, *, remove_on_failure: bool) -> None:
        """A two-step CREATE (``overwrite=false``) of ``full`` holding ``data``: the
        NameNode's redirect, then the data to the DataNode it names. Raises _Transient
        when a repeat may succeed, _Taken when ``full`` exists, or the refusal.
        ``remove_on_failure``: delete what a failed CREATE may have left at ``full`` (a
        temp file; never a final name, which may be another owner's)."""
        leftover = True  # whether a failure may have left a file at ``full``
        try:
            res = self._once(self._client._create, full, overwrite="false")
            if res.status_code != 307 or "location" not in res.headers:
                raise _refusal(f"CREATE {full}", res)
            redirected_by = self._client._urls[0]  # the hdfs client moves it past failures
            try:
                put = self._client._request("PUT", res.headers["location"], data=data)
            except requests.RequestException as exc:
                raise self._unanswered(f"CREATE {full} (data)", exc) from exc
            if put.status_code >= 400:
                exception = _remote_exception(put)
                leftover = exception not in _REFUSED_BEFORE_CREATE
                if exception in _ASK_ANOTHER_NAMENODE:
                    self._next_namenode(redirected_by)
                    raise _Transient(f"CREATE {full} (data): {_remote_message(put)}")
                if put.status_code >= 500:
                    raise _Transient(f"CREATE {full} (data): {_remote_message(put)}")
                if exception == "FileAlreadyExistsException":
                    leftover = False  # the file there is not this CREATE's
                    raise _Taken(f"CREATE {full} (data): {_remote_message(put)}")
                raise _refusal(f"CREATE {full} (data)", put)
        except StorageError:
            if remove_on_failure and leftover:  # made, then refused; a partial file
                self._delete_quietly(full)
            raise

    def put_exclusive(self, path: str, data: bytes) -> None:
        if data:
            super().put_exclusive(path, data)
            return
        full = self._abs(path)
        unanswered = False  # whether an attempt went unanswered: it may have made the file

        def once() -> None:
            nonlocal unanswered
            try:
                self._write(full, b"", remove_on_failure=False)
            except _Transient:
                unanswered = True
                raise
            except _Taken:
                st = self._status(full) if unanswered else None
                if st is not None and st["type"] == "FILE" and int(st["length"]) == 0:
                    return  # an unanswered attempt made it, or another the same empty file
                raise PublishConflict(path) from None

        retry(once, **self._retry)

    def _next_namenode(self, redirected_by: str) -> None:
        """The NameNode that redirected a CREATE is a standby (the DataNode says so): send
        the next calls to the next one. A standby redirects a CREATE as an active one
        does, so the hdfs client, which moves on when a NameNode's own answer is a
        StandbyException, would send every CREATE to it again."""
        with self._client._lock:
            if self._client._urls[0] == redirected_by:  # no other thread moved it yet
                self._client._urls.rotate(-1)

    def publish(self, staged: Staged, path: str) -> None:
        file_id, _, rel = staged.handle.partition(":")
        src, dst = self._abs(rel), self._abs(path)
        done = self._rename(src, dst)
        if done is False:  # a taken name, or a missing parent: made now, and sent once more
            self._call(self._client._mkdirs, dst.rpartition("/")[0] or "/")
            done = self._rename(src, dst)
        if not done:
            self._settle(file_id, staged.size, src, dst, path)

    def _rename(self, src: str, dst: str) -> bool | None:
        """One RENAME: whether it was done; None when it went unanswered (dropped, 5xx)."""
        try:
            res = self._once(self._client._rename, src, destination=dst)
        except _Transient as exc:
            log.warning("rename %s -> %s unanswered (%s): checking the namespace", src, dst, exc)
            return None
        if res.status_code >= 400:
            raise _refusal(f"RENAME {src} -> {dst}", res)
        return res.json().get("boolean") is True

    def _settle(self, file_id: str, size: int, src: str, dst: str, path: str) -> None:
        """Decide a rename that answered false or not at all, from the namespace."""
        dst_st, src_st = self._status(dst), self._status(src)
        if dst_st is not None:
            if file_id and str(dst_st.get("fileId", "")) == file_id:
                return  # our inode is at the final name: the rename happened
            if not file_id and src_st is None and int(dst_st.get("length", -1)) == size:
                return  # no fileId from this server: the weaker size check
            raise PublishConflict(path)
        if src_st is None:
            raise StorageError(f"staged file {src} vanished and {dst} does not exist")
        raise StorageError(f"rename {src} -> {dst} did not happen; staged file kept")

    def discard(self, staged: Staged) -> None:
        self.delete(staged.handle.partition(":")[2])

    def delete(self, path: str) -> None:
        self._call(self._client._delete, self._abs(path), recursive="false")

    def _delete_quietly(self, full: str) -> None:
        """One DELETE, not retried with back-off: called inside retried operations (a
        nested retry multiplied the time a failing stage took), and ``gc_temp`` removes what
        stays. It is sent once more, at once, only when the connection was dropped without
        an answer (a pooled keep-alive connection the server had closed, as one may after a
        refused PUT): the DELETE never reached a server, and a new connection costs one
        connect. Its own failure is logged, never raised: the caller's error is the one to
        report."""
        for attempt in (1, 2):
            try:
                res = self._once(self._client._delete, full, recursive="false")
                break
            except StorageError as exc:
                if attempt == 1 and _dropped_unanswered(exc):
                    continue
                log.warning("could not remove %s (gc_temp will): %s", full, exc)
                return
        if res.status_code >= 400 and res.status_code != 404:
            log.warning("could not remove %s (gc_temp will): %s", full, _remote_message(res))

    def _remove_temp(self, path: str) -> bool:
        res = self._call(self._client._delete, self._abs(path), recursive="false")
        return bool(res.json().get("boolean"))

    def _remove_empty_dir(self, path: str) -> None:
        self._delete_quietly(self._abs(path))  # non-recursive: fails if refilled

    def close(self) -> None:
        self._client._session.close()
        if self._keeper is not None:
            self._keeper.close()


def _session(ca_file: str | None) -> requests.Session:
    session = _Session()
    if ca_file:
        session.verify = ca_file
    return session


def _under(exc: BaseException, kinds: tuple[type[E], ...]) -> E | None:
    """The first exception of ``kinds`` in or under ``exc``: requests wraps urllib3's
    errors (a MaxRetryError whose ``reason``, or a ProtocolError whose arguments, hold the
    ssl or connection error), and our errors are raised from theirs."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, kinds):
            return e
        todo += [*e.args, getattr(e, "reason", None), e.__cause__, e.__context__]
    return None


def _cert_verify_error(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification failure under a requests error, if that is what it is."""
    return _under(exc, (ssl.SSLCertVerificationError,))


def _dropped_unanswered(exc: BaseException) -> bool:
    """Whether ``exc`` came from a connection closed before any answer came back
    (urllib3's ProtocolError("Connection aborted.", RemoteDisconnected(...)))."""
    return _under(exc, (http.client.RemoteDisconnected, ConnectionResetError)) is not None


def _op(method: Callable[..., requests.Response]) -> str:
    """The WebHDFS op of one of the hdfs client's handlers (``mkdirs_handler``: MKDIRS),
    as errors name it."""
    return method.__name__.removesuffix("_handler").upper()


def _remote_exception(res: requests.Response) -> str:
    """The ``exception`` of a RemoteException answer ("" when it is not one)."""
    try:
        return str(res.json()["RemoteException"]["exception"])
    except (ValueError, KeyError, TypeError):
        return ""


def _remote_message(res: requests.Response) -> str:
    """``Exception: message`` of a RemoteException answer, or the HTTP status. A DataNode's
    answer carries the NameNode's Java stack trace in its message: its ``at ...`` lines
    are dropped, and the lines left are joined into one."""
    try:
        remote = res.json()["RemoteException"]
        text = str(remote.get("message"))
    except (ValueError, KeyError, TypeError):
        return f"HTTP {res.status_code}"
    said = " ".join(line.strip() for line in text.splitlines()
                    if line.strip() and not line.strip().startswith("at "))
    return f"HTTP {res.status_code} {remote.get('exception')}: {said}"


def _refusal(what: str, res: requests.Response) -> StorageError:
    """The error of a 4xx answer: StorageDenied when HDFS's permissions refused it, or when
    a secure NameNode refused the Kerberos principal acting for ``hdfs_user`` (``doas``:
    "User: x is not allowed to impersonate y", an AuthorizationException from Hadoop 3.5,
    a SecurityException wrapping one from older NameNodes; a SecurityException over a
    stale delegation token is no refusal of this user, and stays a StorageError)."""
    message = f"{what}: {_remote_message(res)}"
    exception = _remote_exception(res)
    if exception == "AccessControlException":
        return StorageDenied(message)
    if exception == "AuthorizationException" or (
            exception == "SecurityException" and "AuthorizationException" in message):
        return StorageDenied(f"{message} (the cluster's hadoop.proxyuser.* settings decide "
                             "whom the principal may act for as output.hdfs_user)")
    return StorageError(message)
