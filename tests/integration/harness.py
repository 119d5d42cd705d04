"""Helpers for end-to-end tests: real exporter processes against the real broker.

- :func:`exporter_env` builds the environment of a ``garmexport`` process (only
  ``GARMEXPORT_*`` variables the test sets; the caller's own ones are dropped);
- :class:`Exporter` is one ``garmexport run`` subprocess: its JSON log goes to a file in the
  test's tmp dir (:meth:`Exporter.tail` prints its end when a test fails), and the test
  waits for log events, kills it (SIGKILL) or stops it (SIGTERM), reads its CPU time;
- :func:`produce` writes generated records once, before any exporter starts
  (:func:`produce_in_background`: while they run);
- :func:`topic_ends` reads the topic up to its end as the read began (the watermark of a
  fetch: the queried high watermark is wrong on tansu) and :func:`committed_upto` reads,
  from the markers in the output, how far every partition is committed: the exporter has
  caught up when every W reaches the end;
- :func:`verify` runs ``garmexport verify --json`` and returns its exit code and report.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from garmexport.kafka.topic_scan import scan
from garmexport.cli.produce import client_settings, produce as produce_records
from garmexport.settings.load import load_config
from garmexport.testbed.generator import Spec
from garmexport.protocol.naming import FileName, parse_day_dir
from garmexport.pipeline.recovery import read_partition_state
from garmexport.storage.open import open_storage

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
NOW_MS = 1_793_700_000_000  # 2026-11-03, fixed so that event days do not depend on the clock
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def exporter_env(bootstrap: str, topic: str, root: str, **overrides: object) -> dict[str, str]:
    """Environment of an exporter (or verify) process; ``overrides`` as ``SECTION_KEY=v``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GARMEXPORT_")}
    settings = {
        # One reader per process unless a test asks for more (test_parallelism.py): tansu
        # keeps a member that leaves while the group rebalances, and the two readers of a
        # stopping instance leave together; the next members of that group then wait minutes
        # for it (DESIGN.md 9.8). Kafka removes it.
        "ACTORS_PARALLELISM": 1,
        # A group per topic, so one test's exporters never wait on another's members in the
        # session's one broker: a member tansu keeps (above) stalled the next test's join for
        # over 240 s in a CI run when every test shared the default group.
        "SOURCE_GROUP_ID": f"garmexport-{topic}",
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "SOURCE_TOPIC": topic, "OUTPUT_ROOT": root,
        "METRICS_PORT": 0, "METRICS_HOST": "127.0.0.1", "WRITER_MAX_FILE_AGE_S": 2,
        "PROTOCOL_HEARTBEAT_INTERVAL_S": 2, "KAFKA_SESSION_TIMEOUT_MS": 3000,
        "KAFKA_HEARTBEAT_INTERVAL_MS": 300, "LOG_FORMAT": "json",
        "PROTOCOL_SHUTDOWN_TIMEOUT_S": 30,
    }
    settings.update({k.upper(): v for k, v in overrides.items()})
    env.update({f"GARMEXPORT_{k}": str(v) for k, v in settings.items() if v is not None})
    return env


class Exporter:
    """One ``garmexport run`` process; ``name`` labels its log file and messages."""

    def __init__(self, env: Mapping[str, str], log_dir: Path, name: str,
                 extra_env: Mapping[str, str] | None = None, own_group: bool = False) -> None:
        """``own_group``: in a process group of its own (its pid), as a shell starts a job,
        for a test that signals the group."""
        self.name = name
        self.log_path = log_dir / f"exporter-{name}.log"
        self._log = open(self.log_path, "wb")
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [PYTHON, "-m", "garmexport", "run", "--instance", f"e2e-{name}"],
            env={**env, **(extra_env or {})}, cwd=ROOT, stdout=self._log,
            stderr=subprocess.STDOUT, process_group=0 if own_group else None)
        self.instance = f"e2e-{name}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def events(self, event: str | None = None) -> list[dict]:
        """Parsed JSON log lines so far (``event`` filters by name); other lines skipped."""
        out = []
        for line in self.log_path.read_bytes().splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict) and (event is None or doc.get("event") == event):
                    out.append(doc)
        return out

    def wait_event(self, event: str, timeout_s: float = 60.0, count: int = 1,
                   where: Callable[[dict], bool] = lambda doc: True) -> dict:
        """The ``count``-th log event ``event`` matching ``where``; AssertionError on
        timeout or if the process exits first."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = [d for d in self.events(event) if where(d)]
            if len(found) >= count:
                return found[count - 1]
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.process.returncode} before "
                                     f"{event!r}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {event!r} in {timeout_s} s:\n{self.tail()}")
            time.sleep(0.1)

    def metrics_port(self, timeout_s: float = 30.0) -> int:
        return int(self.wait_event("metrics_serving", timeout_s)["port"])

    def http_get(self, path: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
        """GET on the metrics port; (status, body), errors included."""
        url = f"http://127.0.0.1:{self.metrics_port()}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far (from /proc/<pid>/stat)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def kill(self) -> int:
        """SIGKILL and reap; return the exit code (-9 unless it had already exited)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        return self.process.wait(timeout=30)

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM (a clean stop) and wait for the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop within {timeout_s} s:\n{self.tail()}")

    def check_alive(self) -> None:
        """Raise (with the end of its log) if the process has exited."""
        if not self.alive():
            raise AssertionError(f"{self.name} exited {self.process.returncode}:\n{self.tail()}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_bytes().decode(errors="replace").splitlines()
        return f"--- last {lines} lines of {self.log_path} ---\n" + "\n".join(text[-lines:])

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill()
        self._log.close()


@contextlib.contextmanager
def exporter_runs() -> Iterator[list[Exporter]]:
    """A list to append the test's exporters to: on a failure the end of each one's log is
    printed; at the end every one still running is killed and its log closed."""
    runs: list[Exporter] = []
    try:
        yield runs
    except BaseException:
        for run in runs:
            print(run.tail(25))
        raise
    finally:
        for run in runs:
            run.close()


def produce(bootstrap: str, topic: str, count: int, *, partitions: int = 4, seed: int = 1,
            days: int = 3, late_share: float = 0.05, bad_share: float = 0.0,
            mix: Mapping[str, float] | None = None, rate: float | None = None,
            now_ms: int = NOW_MS) -> dict:
    """Produce ``count`` generated records (all delivered, else AssertionError);
    ``rate`` (records/s) paces them; their Kafka times rise over the ``days`` before
    ``now_ms``."""
    extra = {} if mix is None else {"mix": dict(mix)}
    spec = Spec(now_ms=now_ms, seed=seed, partitions=partitions, days=days,
                late_share=late_share, bad_share=bad_share, **extra)
    settings = client_settings(load_config(None, {}), bootstrap)
    report = produce_records(settings, topic, spec, count, rate=rate)
    assert report["failed"] == 0, report
    return report


def produce_in_background(bootstrap: str, topic: str, count: int,
                          **kwargs: object) -> tuple[threading.Thread, dict]:
    """:func:`produce` in a daemon thread, started: (the thread, the report once it ends).
    Pass ``rate`` so that the stream lasts while the test does its work."""
    report: dict = {}

    def feed() -> None:
        report.update(produce(bootstrap, topic, count, **kwargs))  # type: ignore[arg-type]

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread, report


def topic_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """End offset (last offset + 1) of every partition as the read began (call it once the
    producers are done)."""
    return scan({"bootstrap.servers": bootstrap, "fetch.queue.backoff.ms": 10}, topic,
                lambda partition, records: None, timeout_s=120)


def committed_upto(root: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
    """Per partition, the seek position the markers give (min W + 1), None without one."""
    storage = open_storage(root, "e2e-probe")
    try:
        return {p: read_partition_state(storage, "local", topic, p).state.seek()
                for p in partitions}
    finally:
        storage.close()


def wait_caught_up(root: str, topic: str, ends: Mapping[int, int], timeout_s: float,
                   alive: Callable[[], None] = lambda: None) -> float:
    """Wait until the markers of every partition reach its end; return the seconds waited.

    ``alive`` is called every round and should raise if an exporter died.
    """
    started = time.monotonic()
    while True:
        upto = committed_upto(root, topic, sorted(ends))
        if all(upto[p] is not None and upto[p] >= end for p, end in ends.items()):
            return time.monotonic() - started
        alive()
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not caught up in {timeout_s} s: markers {upto}, ends {dict(ends)}")
        time.sleep(1.0)


def verify(env: Mapping[str, str], timeout_s: float = 300.0) -> tuple[int, dict]:
    """Run ``garmexport verify --json``; return (exit code, report)."""
    done = subprocess.run([PYTHON, "-m", "garmexport", "verify", "--json"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout_s)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"verify printed no report (exit {done.returncode}):\n"
                             f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}") from None
    return done.returncode, report


def assert_exact(env: Mapping[str, str], ends: Mapping[int, int]) -> dict:
    """verify must exit 0, read every partition at least up to ``ends``, and find no
    problem and no record in flight (the exporters have caught up: every record is in the
    output); return its report."""
    code, report = verify(env)
    problems = {p: r for p, r in report["partitions"].items()
                if r["duplicates"] or r["missing"] or r["misplaced"] or r["unexpected"]
                or r["in_flight"]}
    assert code == 0 and report["ok"] and not problems, json.dumps(report, indent=1)[-4000:]
    assert sorted(int(p) for p in report["partitions"]) == sorted(ends), report
    short = {p: r["end"] for p, r in report["partitions"].items() if r["end"] < ends[int(p)]}
    assert not short, f"verify read less of the topic than {dict(ends)}: ends {short}"
    return report


def export_all_exactly_once(env: Mapping[str, str], log_dir: Path, name: str) -> None:
    """Run one exporter with ``env`` until it has committed the topic to its end, stop it
    cleanly, and check that every record is in the output exactly once."""
    bootstrap, topic = env["GARMEXPORT_KAFKA_BOOTSTRAP_SERVERS"], env["GARMEXPORT_SOURCE_TOPIC"]
    with exporter_runs() as runs:
        run = Exporter(env, log_dir, name)
        runs.append(run)
        ends = topic_ends(bootstrap, topic)
        wait_caught_up(env["GARMEXPORT_OUTPUT_ROOT"], topic, ends, 120, run.check_alive)
        assert run.terminate() == 0, run.tail()
    assert_exact(env, ends)


def foreign_visible_files(root: Path) -> list[str]:
    """Files a reader of the datasets could see that are not published output names:
    anything outside ``_``/``.`` directories that is not ``<dataset>/day=D/<final name>``."""
    bad = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if any(part.startswith(("_", ".")) for part in rel[:-1]) or path.is_dir():
            continue
        if rel[-1].startswith(("_", ".")):
            continue
        ok = (len(rel) == 3 and parse_day_dir(rel[1]) is not None
              and FileName.parse(rel[2]) is not None)
        if not ok:
            bad.append("/".join(rel))
    return bad


def repair(env: Mapping[str, str], *args: str, extra: Mapping[str, str] | None = None,
           timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
    """Run ``garmexport repair ARGS`` (progress on every file) with ``env`` and ``extra``."""
    return subprocess.run([PYTHON, "-m", "garmexport", "repair", "--progress-s", "0", *args],
                          env={**env, **(extra or {})}, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout_s)


def files_under(root: Path) -> set[str]:
    """Every file under ``root`` (relative paths) but the exporters' temp files."""
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not str(p.relative_to(root)).startswith("_tmp")}


def all_alive(runs: list[Exporter]) -> Callable[[], None]:
    """A check that raises when any of ``runs`` has exited (for :func:`wait_caught_up`)."""
    def alive() -> None:
        for run in runs:
            run.check_alive()
    return alive


def stop_caught_up(runs: list[Exporter], bootstrap: str, topic: str, root: Path
                   ) -> dict[int, int]:
    """Wait until ``runs`` committed the topic to its end, stop each cleanly (exit 0);
    the topic's ends."""
    ends = topic_ends(bootstrap, topic)
    wait_caught_up(str(root), topic, ends, 120, all_alive(runs))
    for run in runs:
        assert run.terminate() == 0, run.tail()
    return ends


def published_line(line: str) -> bool:
    """A line of ``repair``'s output saying a file was published."""
    return line.startswith("published ")


def repair_sigkilled(env: Mapping[str, str], after: int, delay_s: float,
                     args: tuple[str, ...] = ("--apply",),
                     counted: Callable[[str], bool] = published_line) -> tuple[int, str]:
    """``repair *args``, SIGKILLed ``delay_s`` after the ``after``-th line of its output
    that is ``counted`` (by default: its ``after``-th published file), or after its exit
    if it ends first: (exit code, output)."""
    proc = subprocess.Popen([PYTHON, "-m", "garmexport", "repair", *args], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    lines, published = [], 0
    try:
        while published < after:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            published += counted(line)
        time.sleep(delay_s)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(lines) + rest
