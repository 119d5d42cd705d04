"""The local output root becomes unwritable (every directory immutable): a real fault in a
real ``garmexport run`` process against the real broker.

- retries that run out end the process with exit 1, one failure line, no crash after;
- while the store keeps failing, /health/live turns 503 once the loop has made no
  progress for the live timeout, and one ``store_failing`` line covers the episode;
- after the store comes back, everything is exported exactly once and a SIGTERM exits 0:
  the failure that was retried does not linger;
- with the default back-off, publishing resumes within 10 s of the end of a 20 s outage
  (the README's promise; with a 30 s longest back-off it took 26-27 s).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.disk_faults import frozen, require_immutable
from tests.integration.harness import (
    Exporter, assert_exact, exporter_env, exporter_runs, produce, topic_ends, wait_caught_up,
)

RECORDS = 4_000


def _start(broker, tmp_path: Path, name: str, **overrides: object):  # noqa: ANN001, ANN202
    require_immutable(tmp_path)
    topic = broker.new_topic(partitions=2)
    root = tmp_path / "out"
    settings: dict[str, object] = dict(WRITER_MAX_FILE_AGE_S=1, PROTOCOL_HEARTBEAT_INTERVAL_S=1,
                                       STORAGE_RETRY_INITIAL_S=0.2)
    settings.update(overrides)
    env = exporter_env(broker.bootstrap, topic, str(root), **settings)
    produce(broker.bootstrap, topic, RECORDS, partitions=2, seed=5, days=2)
    run = Exporter(env, tmp_path, name)
    ends = topic_ends(broker.bootstrap, topic)
    wait_caught_up(str(root), topic, ends, timeout_s=90, alive=run.check_alive)
    return topic, root, env, run


def _raw_lines(run: Exporter) -> list[str]:
    """Output lines that are not JSON events (a stray traceback, say)."""
    out = []
    for line in run.log_path.read_text(errors="replace").splitlines():
        try:
            json.loads(line)
        except ValueError:
            out.append(line)
    return out


@pytest.mark.parametrize("parallelism", [1, 2])
def test_retries_that_run_out_end_the_process_with_exit_1(
        broker, tmp_path: Path, parallelism: int) -> None:
    """The same exit and the same failure line from one process and from an instance of
    two readers (the default path), whose supervisor then says which reader failed."""
    topic, root, env, run = _start(broker, tmp_path, f"gives-up-{parallelism}",
                                   STORAGE_RETRY_ATTEMPTS=4, STORAGE_RETRY_MAX_S=1,
                                   ACTORS_PARALLELISM=parallelism)
    try:
        with frozen(root):
            produce(broker.bootstrap, topic, 500, partitions=2, seed=6, days=1)
            frozen_at = time.monotonic()
            try:
                code = run.process.wait(timeout=60)
            except Exception:  # noqa: BLE001 - report what it did instead
                raise AssertionError(f"still running 60 s into the outage:\n{run.tail()}") from None
        took = time.monotonic() - frozen_at
        stopped = [d for d in run.events("stopped") if d["code"] != 0]
        print(f"exited {code} after {took:.1f} s: {stopped}")
        assert code == 1, run.tail()
        failures = run.events("failure")
        assert failures and len(failures) <= parallelism, run.tail()
        for failure in failures:
            # one sentence that says it gave up, on what, and why; the traceback only at DEBUG
            said = re.fullmatch(r"gave up after 4 attempts on (publish|marker write) (\S+): "
                                r"(.+) \(storage\.retry_attempts = 4\): make the store "
                                r"reachable and writable; the next start resumes from the "
                                r"output", failure["error"])
            assert said and "Operation not permitted" in said[3], failure
            assert said[2].endswith((".parquet", ".json")), failure
            assert failure["level"] == "ERROR" and "detail" not in failure, failure
            # the process (or reader) that failed ends with that line's reason and code 1
            [own] = [d for d in stopped if d.get("reader") == failure.get("reader")]
            assert own["code"] == 1 and failure["error"] in own["reason"], stopped
        assert len(stopped) == len(failures), run.tail()
        failing = [d.get("reader") for d in run.events("store_failing")]
        assert failing and len(failing) == len(set(failing)), run.tail()  # one per episode
        if parallelism > 1:
            last = run.events()[-1]
            assert last["event"] == "instance_stopped" and last["code"] == 1, last
            # the reader it reaped first of those that failed (both may have, at once)
            assert last["reason"] in {f"{f['reader']} exited 1" for f in failures}, last
        assert _raw_lines(run) == [], "\n".join(_raw_lines(run))
    except BaseException:
        print(run.tail(60))
        raise
    finally:
        run.close()


def _wait_http(run: Exporter, path: str, status: int, timeout_s: float) -> tuple[float, bytes]:
    started = time.monotonic()
    while True:
        got, body = run.http_get(path)
        if got == status:
            return time.monotonic() - started, body
        run.check_alive()
        assert time.monotonic() - started < timeout_s, f"{path} stays {got}, not {status}: {body!r}"
        time.sleep(0.5)


def _once_per_reader(events: list[dict], parallelism: int) -> bool:
    """Whether ``events`` are one per process (or reader, at most ``parallelism``)."""
    readers = [d.get("reader") for d in events]
    return 1 <= len(readers) <= parallelism and len(readers) == len(set(readers))


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_long_outage_fails_liveness_and_a_recovered_one_stops_cleanly(
        broker, tmp_path: Path, parallelism: int) -> None:
    # attempts enough for minutes: only liveness can tell that the loop is stuck
    topic, root, env, run = _start(broker, tmp_path, f"recovers-{parallelism}",
                                   STORAGE_RETRY_ATTEMPTS=1000, STORAGE_RETRY_MAX_S=1,
                                   ACTORS_PARALLELISM=parallelism)
    try:
        assert run.http_get("/health/live")[0] == 200
        with frozen(root):
            produce(broker.bootstrap, topic, 500, partitions=2, seed=6, days=1)
            # the live timeout is 30 s: /health/live answers 503 soon after, naming the store
            took, body = _wait_http(run, "/health/live", 503, timeout_s=60)
            print(f"liveness 503 after {took:.1f} s: {body!r}")
            assert took > 20, body
            assert b"no progress" in body and b"Operation not permitted" in body, body
            assert _once_per_reader(run.events("store_failing"), parallelism), run.tail()
        _wait_http(run, "/health/live", 200, timeout_s=30)
        ends = topic_ends(broker.bootstrap, topic)
        wait_caught_up(str(root), topic, ends, timeout_s=60, alive=run.check_alive)
        resumed = run.wait_event("resumed", timeout_s=10)
        assert resumed["failed_s"] > 20, resumed
        assert _once_per_reader(run.events("store_failing"), parallelism), run.tail()
        time.sleep(2)
        assert run.terminate() == 0, run.tail()
        stopped = run.events("stopped")
        assert len(stopped) == parallelism, stopped  # every process (reader) stopped
        assert all(d["code"] == 0 and "settled=True" in d["reason"] for d in stopped), stopped
        assert run.events("failure") == [], run.tail()
        assert _raw_lines(run) == [], "\n".join(_raw_lines(run))
        assert_exact(env, ends)
    except BaseException:
        print(run.tail(60))
        raise
    finally:
        run.close()


def test_with_the_default_back_off_a_20_s_outage_is_over_within_10_s_of_its_end(
        broker, tmp_path: Path) -> None:
    # the shipped back-off: nothing overridden but what the caught-up start needs
    topic, root, env, run = _start(broker, tmp_path, "default-back-off",
                                   STORAGE_RETRY_INITIAL_S=0.5)
    with exporter_runs() as runs:
        runs.append(run)
        with frozen(root):
            produce(broker.bootstrap, topic, 500, partitions=2, seed=6, days=1)
            run.wait_event("store_failing", timeout_s=30)
            time.sleep(20)
            assert run.events("resumed") == [], run.tail()
        thawed = time.monotonic()
        run.wait_event("resumed", timeout_s=60)
        resumed_after = time.monotonic() - thawed
        ends = topic_ends(broker.bootstrap, topic)
        wait_caught_up(str(root), topic, ends, timeout_s=60, alive=run.check_alive)
        caught_up_after = time.monotonic() - thawed
        print(f"resumed {resumed_after:.1f} s, caught up {caught_up_after:.1f} s after the thaw")
        # caught up is seen by polling the markers once a second
        assert resumed_after < 10 and caught_up_after < 11, (resumed_after, caught_up_after)
        assert run.events("failure") == [], run.tail()
        assert run.terminate() == 0, run.tail()
        assert_exact(env, ends)
