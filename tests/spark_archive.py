"""A class-data archive of Spark's classes, shared by every Spark JVM the suite starts.

A Spark JVM in a test lives seconds on kilobytes of data, and most of its CPU goes to
loading and verifying the same ~20,000 classes each time: a compaction-like job took 16.5 s
on an idle 2-core machine, 9.4 s with this archive (JDK 17's dynamic class-data sharing,
``-XX:ArchiveClassesAtExit`` once, ``-XX:SharedArchiveFile`` after). The suite starts about
sixty such JVMs and is bound by its two cores, so each one's start-up is paid by every test
running beside it.

:func:`ensure` makes the archive once per environment (in the venv, named after the JVM,
pyspark's jars and the flags; 80 s on an idle 2-core machine: one Spark job with Hive
support, then one start with ``-Xshare:on``, which fails unless the archive maps; 217 MB)
and adds it to ``SPARK_SUBMIT_OPTS``, which spark-submit passes to the JVMs it launches.
Measured on an idle machine: the two killed-compaction tests of test_compaction.py 70 s ->
50 s, test_compact_cli.py's runs 55 s -> 27 s. A JVM whose class path does not match the
archive's starts without it, silently (``-Xlog:cds=off``): only slower.
``GARMEXPORT_TEST_SPARK_ARCHIVE=0`` turns it off. Production JVMs are not touched.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = "GARMEXPORT_TEST_SPARK_ARCHIVE"
#: the name of the test reports' user property that carries what :func:`ensure` did
PROPERTY = "spark_archive"
#: the runs that make it: one of fewer Spark tests spends more making it than it saves
WORTH_IT = 10
#: a JVM that cannot use the archive says so on stdout, where tests read the lines of a
#: compaction run: not a word, it starts without it
SILENT = "-Xlog:cds=off,cds+dynamic=off"
_state: dict[str, str] = {}


def _key(jvm_flags: str) -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    java = os.path.realpath(shutil.which("java") or "java")
    names = sorted((p.name, p.stat().st_size) for p in jars.iterdir())
    text = repr((java, os.environ.get("JAVA_HOME", ""), pyspark.__version__, str(jars), names,
                 jvm_flags))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _spark_job(jvm_opts: str, workdir: Path, script: str, timeout_s: float
               ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_SUBMIT_OPTS": jvm_opts, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run([sys.executable, "-c", script, str(workdir)], env=env,
                          capture_output=True, text=True, timeout=timeout_s,
                          cwd=Path(__file__).resolve().parent.parent)


#: what the archive holds is what this job loads: a Hive-enabled session (the compaction's
#: own builder), Parquet written and read, a table and SQL over it
_DUMP_JOB = """
import sys
from garmexport.compaction.spark_job import build_session
from tests.spark.conftest import local_spark_conf
work = sys.argv[1]
spark = build_session("local[1]", "", local_spark_conf(work), app_name="class-archive")
df = spark.range(0, 2000).selectExpr("id", "cast(id % 3 as string) as day", "id * 2 as v")
df.write.partitionBy("day").parquet(work + "/out")
spark.sql(f"CREATE TABLE t (id BIGINT, v BIGINT) PARTITIONED BY (day STRING) STORED AS "
          f"PARQUET LOCATION '{work}/out'")
spark.sql("MSCK REPAIR TABLE t")
assert spark.sql("SELECT count(*) FROM t WHERE day = '1'").collect()[0][0] > 0
spark.read.parquet(work + "/out").coalesce(1).write.parquet(work + "/again")
print("jvm", spark._jvm.ProcessHandle.current().pid())  # it writes the archive as it exits
spark.stop()
"""

_CHECK_JOB = """
import sys
from garmexport.compaction.spark_job import build_session
from tests.spark.conftest import local_spark_conf
build_session("local[1]", "", local_spark_conf(sys.argv[1]), app_name="class-archive").stop()
"""


def ensure(jvm_flags: str) -> str:
    """Make the archive if missing, add it to ``SPARK_SUBMIT_OPTS``; a line saying which."""
    if "line" in _state:
        return _state["line"]
    line = _ensure(jvm_flags)
    _state["line"] = line
    return line


def _ensure(jvm_flags: str) -> str:
    if os.environ.get(ENV, "1") == "0":
        return f"Spark class-data archive: off ({ENV}=0)"
    try:
        path = Path(sys.prefix) / f"garmexport-test-spark-{_key(jvm_flags)}.jsa"
    except (ImportError, OSError) as e:
        return f"Spark class-data archive: none ({e})"
    started = time.monotonic()
    try:
        with open(f"{path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one worker makes it, the others wait for it
            made = ""
            if not path.exists():
                error = _make(path, jvm_flags)
                if error:
                    return f"Spark class-data archive: none, {error}"
                made = f", made in {time.monotonic() - started:.0f} s"
    except OSError as e:
        return f"Spark class-data archive: none ({e})"
    flag = f"-XX:SharedArchiveFile={path}"
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if flag not in opts:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} {flag} {SILENT}".strip()
    return f"Spark class-data archive: {path.name}{made}"


def _gone(pid: int, timeout_s: float) -> bool:
    """Whether process ``pid`` ended within ``timeout_s`` (it is not our child)."""
    deadline = time.monotonic() + timeout_s
    while os.path.exists(f"/proc/{pid}"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _make(path: Path, jvm_flags: str) -> str:
    """Dump and check the archive into ``path``; the reason when it could not be made."""
    with tempfile.TemporaryDirectory(prefix="spark-archive-") as tmp:
        work, candidate = Path(tmp), Path(tmp) / "spark.jsa"
        try:
            dump = _spark_job(f"{jvm_flags} -XX:ArchiveClassesAtExit={candidate} {SILENT}",
                              work / "dump", _DUMP_JOB, 300)
            if dump.returncode != 0:
                return f"its job exited {dump.returncode}: {dump.stderr.strip()[-300:]}"
            pids = [int(w[1]) for w in map(str.split, dump.stdout.splitlines())
                    if len(w) == 2 and w[0] == "jvm"]
            if not pids or not _gone(pids[0], 300) or not candidate.exists():
                return f"its JVM wrote no archive ({dump.stdout.strip()[-300:]})"
            check = _spark_job(f"{jvm_flags} -Xshare:on -XX:SharedArchiveFile={candidate}",
                               work / "check", _CHECK_JOB, 300)
        except subprocess.TimeoutExpired as e:
            return f"its job did not end within {e.timeout:.0f} s"
        if check.returncode != 0:
            return f"a JVM could not map it: {(check.stdout + check.stderr).strip()[-300:]}"
        shutil.move(str(candidate), f"{path}.tmp")
        os.replace(f"{path}.tmp", path)
    return ""
