"""Start a real HDFS (Hadoop's NameNode and DataNodes, ``MiniDFSCluster``) for tests.

The jars are Hadoop's own from Maven Central (``tests/hdfs/pom.xml``:
``hadoop-client-minicluster`` and what it needs), fetched once with Maven into a cache
directory (``GARMEXPORT_HADOOP_JARS``, default ``~/.cache/garmexport/hadoop-<version>``) and
reused by every later run; ``tests/hdfs/MiniHdfs.java`` is compiled once into the same cache.
The cluster runs in one JVM on loopback, every port chosen free by Hadoop, its data in a
temp directory. WebHDFS is on; permissions are enforced (the root ``/`` is open to all, so a
test user writes under a directory it makes or is given).

:func:`mini_hdfs` is a context manager yielding a :class:`MiniHdfs`, whose :meth:`command`
drives the faults a test needs (safe mode, a quota, a failover, a DataNode or NameNode
stopped) through the launcher's standard input. Without Maven or Java, or when the jars
cannot be fetched, :class:`HdfsUnavailable` says why.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HADOOP_VERSION = "3.5.0"
HERE = Path(__file__).parent / "hdfs"
POM = HERE / "pom.xml"
LAUNCHER = HERE / "MiniHdfs.java"


class HdfsUnavailable(RuntimeError):
    """Java or Maven is missing, the jars cannot be fetched, or the cluster did not start."""


def cache_dir() -> Path:
    given = os.environ.get("GARMEXPORT_HADOOP_JARS")
    if given:
        return Path(given)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "garmexport" / f"hadoop-{HADOOP_VERSION}"


def hadoop_jars() -> Path:
    """The directory of Hadoop's jars, fetched with Maven on first use (about 20 s, 110 MB)."""
    return maven_jars(POM, cache_dir() / "lib")


def maven_jars(pom: Path, lib: Path) -> Path:
    """``lib`` holding the jars ``pom`` depends on, fetched with Maven unless already there
    for this version of ``pom``."""
    stamp = lib / ".complete"
    if stamp.is_file() and stamp.read_text() == _digest(pom):
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise HdfsUnavailable("no `mvn` on PATH: Maven fetches Hadoop's jars (apt-get install maven)")
    lib.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="lib-", dir=lib.parent))
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
         f"-DoutputDirectory={tmp}"], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise HdfsUnavailable(f"mvn could not fetch the jars of {pom} (exit {proc.returncode}): "
                              f"{(proc.stdout + proc.stderr)[-2000:]}")
    shutil.rmtree(lib, ignore_errors=True)
    tmp.rename(lib)  # whole or not at all: a killed fetch leaves no half a directory
    stamp.write_text(_digest(pom))
    return lib


def launcher_classes(lib: Path) -> Path:
    """``MiniHdfs.class`` compiled once per version of its source."""
    out = cache_dir() / f"classes-{_digest(LAUNCHER)[:12]}"
    if (out / "MiniHdfs.class").is_file():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise HdfsUnavailable("no `javac` on PATH: the HDFS launcher needs a JDK")
    tmp = Path(tempfile.mkdtemp(prefix="classes-", dir=cache_dir()))
    proc = subprocess.run([javac, "-nowarn", "-cp", f"{lib}/*", "-d", str(tmp), str(LAUNCHER)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise HdfsUnavailable(f"javac {LAUNCHER} failed: {proc.stderr[-2000:]}")
    with contextlib.suppress(OSError):
        tmp.rename(out)
    return out


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class MiniHdfs:
    """A running cluster: its NameNodes' ports and the pipe that drives it."""

    proc: subprocess.Popen[str]
    namenodes: list[dict[str, int]]
    data_dir: Path
    log_path: Path
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def http_ports(self) -> list[int]:
        return [nn["http"] for nn in self.namenodes]

    @property
    def https_ports(self) -> list[int]:
        """The NameNodes' HTTPS ports (0 unless ``dfs.http.policy`` turns HTTPS on)."""
        return [nn.get("https", 0) for nn in self.namenodes]

    def webhdfs_uri(self, path: str, *, namenode: int | None = None) -> str:
        """``webhdfs://`` URI of ``path``: every NameNode (HA) or the one given."""
        ports = self.http_ports if namenode is None else [self.http_ports[namenode]]
        hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
        return f"webhdfs://{hosts}/{path.strip('/')}"

    def hdfs_uri(self, path: str, *, namenode: int = 0) -> str:
        """``hdfs://`` (RPC) URI of ``path`` on NameNode ``namenode``, as Spark reads it."""
        return f"hdfs://127.0.0.1:{self.namenodes[namenode]['rpc']}/{path.strip('/')}"

    def command(self, line: str, timeout_s: float = 120.0) -> dict[str, object]:
        """Send one launcher command; its JSON answer; RuntimeError when it failed."""
        with self._lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            answer = _read_json_line(self.proc, timeout_s, self.log_path)
        if not answer.get("ok"):
            raise RuntimeError(f"MiniHdfs {line!r}: {answer.get('error')}")
        if "namenodes" in answer:
            self.namenodes = answer["namenodes"]  # type: ignore[assignment]
        return answer

    def mkdir(self, path: str, owner: str, mode: str = "755") -> None:
        self.command(f"mkdir {path} {owner} {mode}")


def _read_json_line(proc: subprocess.Popen[str], timeout_s: float,
                    log_path: Path) -> dict[str, object]:
    """The launcher's next JSON line (others are Hadoop's chatter on stdout)."""
    assert proc.stdout is not None
    result: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                result.append(line)
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not result:
        state = "exited" if proc.poll() is not None else "did not answer"
        raise HdfsUnavailable(f"MiniHdfs {state} within {timeout_s:.0f} s; see {log_path}")
    return json.loads(result[0])


@contextlib.contextmanager
def mini_hdfs(*, datanodes: int = 2, ha: bool = False, conf: dict[str, str] | None = None,
              start_timeout_s: float = 180.0, env: dict[str, str] | None = None,
              jvm_args: Sequence[str] = (), rpc_port: int = 0,
              classpath: Sequence[Path] = ()) -> Iterator[MiniHdfs]:
    """Run one MiniDFSCluster (``ha``: two NameNodes, the first active); stop it on exit.
    ``jvm_args`` go to the JVM before the class path (``-Dkey=value``: system properties,
    such as ``java.security.krb5.conf`` for a Kerberized cluster). ``rpc_port``: the
    NameNode's RPC port (not HA; 0: one chosen free). ``classpath``: directories put
    before the jars, for the files Hadoop reads as class path resources (``ssl-server.xml``
    and ``ssl-client.xml``, named by ``dfs.https.server.keystore.resource`` and
    ``hadoop.ssl.server.conf``)."""
    java = shutil.which("java")
    if java is None:
        raise HdfsUnavailable("no `java` on PATH")
    lib = hadoop_jars()
    classes = launcher_classes(lib)
    tmp = Path(tempfile.mkdtemp(prefix="garm-hdfs-"))
    args = [java, "-Xmx768m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true", *jvm_args,
            "-cp", ":".join([*map(str, classpath), str(classes), f"{lib}/*"]),
            "MiniHdfs", "--dir", str(tmp / "data"), "--datanodes", str(datanodes)]
    if ha:
        args.append("--ha")
    elif rpc_port:
        args += ["--rpc-port", str(rpc_port)]
    for key, value in (conf or {}).items():
        args += ["--conf", f"{key}={value}"]
    log_path = tmp / "minihdfs.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                            text=True, cwd=tmp, start_new_session=True,
                            env={**os.environ, **(env or {})})
    try:
        ready = _read_json_line(proc, start_timeout_s, log_path)
        yield MiniHdfs(proc, ready["namenodes"], tmp / "data", log_path)  # type: ignore[arg-type]
    finally:
        _stop(proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _stop(proc: subprocess.Popen[str], grace_s: float = 10.0) -> None:
    """``stop`` on its input (a clean shutdown), then SIGKILL of the group after the grace."""
    if proc.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.close()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
