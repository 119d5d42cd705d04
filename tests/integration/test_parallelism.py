"""One instance, several reader processes (``actors.parallelism`` 2): real processes, the
real broker.

What the operator must see is one instance: one metrics port with every series of every
reader (a ``reader`` label tells them apart), one ``/health/live`` and ``/health/ready``
folding the readers' (a stopped reader fails readiness at once and liveness after the
live timeout, naming it), one log stream where
each line names its reader, signals forwarded with today's exit codes, a reader that dies
taking the instance down with its status, and readers that never outlive their
supervisor. Exactly once holds with three instances of two readers in one group while
one reader, one supervisor alone and one whole instance are SIGKILLed.

Each test has a consumer group of its own: the readers of a stopping instance leave the
group together, and tansu may keep one of them (harness.exporter_env, DESIGN.md 9.8).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from garmexport.process.usable_cpus import usable_cpus
from tests.disk_faults import frozen, require_immutable
from tests.integration.harness import (
    Exporter, assert_exact, committed_upto, exporter_env, exporter_runs, foreign_visible_files,
    produce, produce_in_background, topic_ends, wait_caught_up,
)
from tests.processes import wait_gone


#: the live timeout (metrics.live_timeout_s) where a test waits it out: above 10 x the
#: default source.poll_timeout_s (0.5 s), which would win otherwise
LIVE_S = 6.0


def reader_pids(run: Exporter, count: int = 2) -> dict[str, int]:
    """Reader name -> pid, from the supervisor's ``reader_started`` lines."""
    run.wait_event("reader_started", timeout_s=30, count=count)
    return {doc["child"]: int(doc["pid"]) for doc in run.events("reader_started")}


def two_reader_instance(broker, tmp_path: Path, runs: list[Exporter], name: str,
                        records: int, own_group: bool = False, **overrides: object) -> Exporter:
    """An instance of two readers, in a consumer group of its own, over a fresh 2-partition
    topic holding ``records`` generated records; appended to ``runs``. ``own_group``: the
    instance in a process group of its own, as a shell's job."""
    topic = broker.new_topic(partitions=2)
    if records:
        produce(broker.bootstrap, topic, records, partitions=2, seed=3, days=1)
    env = exporter_env(broker.bootstrap, topic, str(tmp_path / "out"), ACTORS_PARALLELISM=2,
                       SOURCE_GROUP_ID=f"g-{topic}", **overrides)
    runs.append(Exporter(env, tmp_path, name, own_group=own_group))
    return runs[-1]


def wait_status(run: Exporter, path: str, status: int, timeout_s: float = 60.0) -> bytes:
    deadline = time.monotonic() + timeout_s
    while True:
        got, body = run.http_get(path)
        if got == status:
            return body
        assert time.monotonic() < deadline, (path, got, body, run.tail())
        time.sleep(0.2)


def by_reader(body: bytes, name: str) -> Counter:
    out: Counter = Counter()
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name == name:
                out[s.labels.get("reader", "")] += s.value
    return out


def test_two_readers_are_one_instance_for_metrics_health_logs_and_sigterm(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=4)
    records = 20_000
    produce(broker.bootstrap, topic, records, partitions=4, seed=5, days=2, bad_share=0.01)
    ends = topic_ends(broker.bootstrap, topic)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), ACTORS_PARALLELISM=2,
                       SOURCE_GROUP_ID=f"g-{topic}", WRITER_MAX_FILE_AGE_S=1,
                       PROTOCOL_HEARTBEAT_INTERVAL_S=1, METRICS_LIVE_TIMEOUT_S=LIVE_S)
    with exporter_runs() as runs:
        run = Exporter(env, tmp_path, "par")
        runs.append(run)
        pids = reader_pids(run)
        assert sorted(pids) == ["r0", "r1"] and run.pid not in pids.values()
        assert run.http_get("/health/live")[0] == 200  # every reader serves once announced
        wait_status(run, "/health/ready", 200)
        wait_caught_up(str(root), topic, ends, timeout_s=120, alive=run.check_alive)

        # metrics: both readers' series on the one port, summing to what was produced
        deadline = time.monotonic() + 30
        while True:
            status, body = run.http_get("/metrics")
            consumed = by_reader(body, "garmexport_events_consumed_total")
            if sum(consumed.values()) == records:
                break
            assert time.monotonic() < deadline, consumed
            time.sleep(0.5)
        assert status == 200 and consumed["r0"] > 0 and consumed["r1"] > 0, consumed
        assert set(by_reader(body, "process_resident_memory_bytes")) == {"supervisor", "r0", "r1"}
        assert set(by_reader(body, "garmexport_build_info")) == {"r0", "r1"}
        assert by_reader(body, "garmexport_reader_scrape_ok") == Counter({"r0": 1, "r1": 1})
        # a partition's gauges are under its owner only (range: two partitions per reader)
        owners = Counter()
        for family in text_string_to_metric_families(body.decode()):
            for s in family.samples:
                if s.name == "garmexport_consumer_lag_offsets":
                    owners[s.labels["partition"]] += 1
        assert owners == Counter({str(p): 1 for p in range(4)}), owners

        # health folds: a stopped reader answers nothing, so the instance is not ready at
        # once, and not live once the reader has been silent for the live timeout (the
        # readers' own, one key: issue 40), each saying which reader is wrong
        frozen_at = time.monotonic()
        os.kill(pids["r1"], signal.SIGSTOP)
        try:
            # the supervisor says so once, with the reader's partitions (issue 32, item 3)
            said = run.wait_event("reader_not_answering", timeout_s=15)
            assert said["level"] == "WARNING" and said["child"] == "r1", said
            assert said["pid"] == pids["r1"] and said["partitions"] in ("0, 1", "2, 3"), said
            for path, want in (("/health/ready", 503), ("/health/live", 200)):
                started = time.monotonic()
                code, answer = run.http_get(path, timeout_s=10)
                waited = time.monotonic() - started
                assert waited < 1.0, f"{path} waited {waited:.1f} s for the stuck reader"
                assert code == want, (path, answer, time.monotonic() - frozen_at)
                doc = json.loads(answer)
                if want == 503:
                    assert any(r.startswith("r1: not answering") for r in doc["reasons"]), doc
                else:
                    assert "r1.not_answering" in doc["detail"], doc
            started = time.monotonic()
            status, body = run.http_get("/metrics", timeout_s=10)
            assert time.monotonic() - started < 1.0, "the scrape waited for the stuck reader"
            assert by_reader(body, "garmexport_reader_scrape_ok") == Counter({"r0": 1, "r1": 0})
            # live a few seconds short of the timeout (a GC pause, a slow call), not past it
            answers = []
            while True:
                code, answer = run.http_get("/health/live", timeout_s=10)
                answers.append((round(time.monotonic() - frozen_at, 1), code))
                if code == 503 or time.monotonic() - frozen_at > LIVE_S + 10:
                    break
                time.sleep(0.25)
            print(f"liveness while r1 is frozen: {answers}")
            assert code == 503 and all(c == 200 for _, c in answers[:-1]), answers
            # last answered at most a watch round (1 s) before the freeze
            assert LIVE_S - 1.5 <= answers[-1][0] <= LIVE_S + 5, answers
            reasons = json.loads(answer)["reasons"]
            assert any(r.startswith("r1: not answering") and f"> live timeout {LIVE_S:g}s" in r
                       for r in reasons), reasons
        finally:
            os.kill(pids["r1"], signal.SIGCONT)
        wait_status(run, "/health/live", 200, timeout_s=20)
        wait_status(run, "/health/ready", 200, timeout_s=20)
        again = run.wait_event("reader_answering_again", timeout_s=5)
        # (its partitions may be "none" then: stopped past the session timeout, it lost them)
        assert again["child"] == "r1" and "partitions" in again, again
        assert len(run.events("reader_not_answering")) == 1, run.tail()

        assert run.terminate() == 0, run.tail()
        wait_gone(list(pids.values()))
        stopped = run.wait_event("instance_stopped", timeout_s=5)
        assert stopped["code"] == 0 and stopped["readers"] == {"r0": 0, "r1": 0}, stopped
        # readers closing their servers on the way out are no stuck readers
        assert len(run.events("reader_not_answering")) == 1, run.tail()
        settled = [d for d in run.events("stopped") if "settled=True" in d["reason"]]
        assert sorted(d["reader"] for d in settled) == ["r0", "r1"], run.tail()
        # one stream: every line names its reader (the supervisor's own lines included)
        lines = run.events()
        assert lines and {d.get("reader") for d in lines} == {"supervisor", "r0", "r1"}
        assert {d["reader"] for d in lines if d["event"] == "assigned"} == {"r0", "r1"}
        # worker threads: each reader its half of the usable CPUs and one more, capped
        threads = {d["reader"]: d["threads"] for d in run.events("writer_threads")}
        cpus = usable_cpus()
        assert threads == {f"r{k}": min(cpus, (cpus + 1 - k) // 2 + 1) for k in range(2)}
        assert foreign_visible_files(root) == []
        assert_exact(env, ends)


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_second_signal_stops_the_instance_at_once_with_its_code(
        broker, tmp_path: Path, signum: int, code: int) -> None:
    with exporter_runs() as runs:
        require_immutable(tmp_path)
        run = two_reader_instance(broker, tmp_path, runs, f"twice-{code}", 5_000,
                                  WRITER_MAX_FILE_AGE_S=100_000, WRITER_IDLE_FLUSH_S=100_000,
                                  PROTOCOL_HEARTBEAT_INTERVAL_S=100_000)
        pids = reader_pids(run)
        # both readers hold open files: no age, idle or heartbeat flush, and a store that
        # refuses every write, so that the clean stop the first signal starts cannot
        # publish them before the second (as test_forced_stop does with one process)
        for partition in (0, 1):
            run.wait_event("first_record", timeout_s=60,
                           where=lambda d, p=partition: d["partition"] == p)
        time.sleep(2.5)  # the writers have handled what was read: their files are open
        with frozen(tmp_path / "out"):
            run.process.send_signal(signum)
            time.sleep(0.05)
            run.process.send_signal(signum)
            assert run.process.wait(timeout=30) == code, run.tail()
        wait_gone(list(pids.values()))
        # the last line says the stop was forced and what every reader left (issue 32,
        # item 2: it said "second signal" while the readers' own lines came after it, or
        # never, as the supervisor killed them on its way out)
        last = run.events()[-1]
        assert last["event"] == "instance_stopped" and last["level"] == "WARNING", run.tail()
        assert last["reason"] == f"second {signal.Signals(signum).name}: stop forced", last
        assert last["readers"] == {"r0": code, "r1": code}, last
        forced = {d["reader"]: d for d in run.events("stop_forced")}
        assert set(forced) == {"r0", "r1"}, run.tail()
        assert last["open_files"] == sum(d["open_files"] for d in forced.values()) > 0, last
        for name, d in forced.items():
            assert last["abandoned"][name] == (
                f"{d['open_files']} open files not published (partitions {d['partitions']})"
                if d["open_files"] else "no file open"), (last, d)


def test_a_reader_that_dies_takes_the_instance_down_with_its_status(
        broker, tmp_path: Path) -> None:
    with exporter_runs() as runs:
        run = two_reader_instance(broker, tmp_path, runs, "reader-dies", 5_000)
        pids = reader_pids(run)
        run.wait_event("assigned", timeout_s=60, count=2)
        os.kill(pids["r0"], signal.SIGKILL)
        assert run.process.wait(timeout=60) == 137, run.tail()
        wait_gone(list(pids.values()))
        exited = {d["child"]: d["code"] for d in run.events("reader_exited")}
        assert exited == {"r0": 137, "r1": 0}, run.tail()  # r1 was stopped cleanly
        assert run.wait_event("instance_stopped", timeout_s=5)["reason"] == \
            "r0 was killed (SIGKILL)"
        # the survivor says why it stops: not an operator's signal, its sibling's end
        [stopping] = [d for d in run.events("stopping") if d["reader"] == "r1"]
        assert stopping["reason"].startswith("another reader of the instance ended"), stopping


def test_readers_never_outlive_their_supervisor(broker, tmp_path: Path) -> None:
    with exporter_runs() as runs:
        run = two_reader_instance(broker, tmp_path, runs, "orphans", 0)
        pids = reader_pids(run)
        run.wait_event("metrics_serving", timeout_s=60)
        assert run.kill() == -9
        wait_gone(list(pids.values()), timeout_s=10)


RECORDS = 120_000
RATE = 5_000  # records/s: the stream lasts about 24 s, so every kill lands mid-stream


def test_three_instances_of_two_readers_stay_exact_across_reader_supervisor_and_instance_kills(
        broker, tmp_path: Path) -> None:
    topic = broker.new_topic(partitions=8)
    root = tmp_path / "out"
    env = exporter_env(broker.bootstrap, topic, str(root), ACTORS_PARALLELISM=2,
                       WRITER_MAX_FILE_AGE_S=1, PROTOCOL_HEARTBEAT_INTERVAL_S=1,
                       SOURCE_GROUP_ID=f"g-{topic}", KAFKA_SESSION_TIMEOUT_MS=2000)
    with exporter_runs() as runs:
        def start(name: str) -> Exporter:
            runs.append(Exporter(env, tmp_path, name))
            return runs[-1]

        producer, produced = produce_in_background(
            broker.bootstrap, topic, RECORDS, partitions=8, seed=31, days=3, late_share=0.1,
            bad_share=0.002, rate=RATE)
        a, b, c = start("a"), start("b"), start("c")
        for run in (a, b, c):
            run.wait_event("assigned", timeout_s=90, where=lambda d: d["partitions"])
        time.sleep(2)

        # one reader of A: A goes down with its status
        a_pids = reader_pids(a)
        os.kill(a_pids["r1"], signal.SIGKILL)
        assert a.process.wait(timeout=60) == 137, a.tail()
        wait_gone(list(a_pids.values()))
        a2 = start("a2")
        a2.wait_event("assigned", timeout_s=90)
        time.sleep(2)

        # B's supervisor alone: its readers die with it
        b_pids = reader_pids(b)
        assert b.kill() == -9
        wait_gone(list(b_pids.values()))
        b2 = start("b2")
        b2.wait_event("assigned", timeout_s=90)
        time.sleep(2)

        # the whole of C at once
        c_pids = reader_pids(c)
        for pid in (c.pid, *c_pids.values()):
            os.kill(pid, signal.SIGKILL)
        c.process.wait(timeout=30)
        wait_gone(list(c_pids.values()))
        upto = committed_upto(str(root), topic, list(range(8)))
        c2 = start("c2")

        producer.join(timeout=180)
        assert not producer.is_alive() and produced.get("failed") == 0, produced
        ends = topic_ends(broker.bootstrap, topic)
        assert sum(ends.values()) == RECORDS
        assert sum(v or 0 for v in upto.values()) < RECORDS, "caught up before the last kill"
        members = (a2, b2, c2)

        def members_alive() -> None:
            for run in members:
                run.check_alive()

        wait_caught_up(str(root), topic, ends, timeout_s=240, alive=members_alive)
        for run in members:
            assert run.terminate() == 0, run.tail()
        assert foreign_visible_files(root) == []
        for run in members:  # every reader published or removed its temp files
            for name in ("r0", "r1"):
                leftover = root / "_tmp" / f"{run.instance}-{name}"
                assert not leftover.exists() or not any(leftover.iterdir()), leftover
        assert_exact(env, ends)


def test_a_stop_while_the_readers_still_import_is_a_clean_stop_not_a_failed_reader(
        broker, tmp_path: Path) -> None:
    """SIGTERM right after the readers are started reaches them while they import, before
    they can handle it: it once killed them by its default action, and the instance exited
    143 with ``reader_exited`` at ERROR, a failed reader that was only asked to stop. They
    start with the signal held back, and honour it once they run."""
    with exporter_runs() as runs:
        run = two_reader_instance(broker, tmp_path, runs, "early-stop", 0)
        run.wait_event("reader_started", timeout_s=60, count=2)
        run.process.send_signal(signal.SIGTERM)
        assert run.process.wait(timeout=60) == 0, run.tail()
        stopped = run.wait_event("instance_stopped", timeout_s=5)
        assert stopped["readers"] == {"r0": 0, "r1": 0}, run.tail()
        assert not [e for e in run.events("reader_exited") if e["level"] != "INFO"], run.tail()


def _state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (T: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def _wait_states(pids: list[int], stopped: bool, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while any((_state(pid) == "T") != stopped for pid in pids):
        assert time.monotonic() < deadline, {pid: _state(pid) for pid in pids}
        time.sleep(0.05)


def test_signals_to_the_instances_process_group_reach_the_whole_instance(
        broker, tmp_path: Path) -> None:
    """The readers once sat in process groups of their own: ``kill -STOP -- -PGID`` (or a
    terminal's Ctrl-Z) froze the supervisor alone while its readers went on (issue 32, item
    4). They share the instance's group now; a SIGTERM to the group, which reaches every
    reader twice (directly and forwarded by the supervisor), is one clean stop."""
    with exporter_runs() as runs:
        run = two_reader_instance(broker, tmp_path, runs, "group", 5_000, own_group=True)
        pids = reader_pids(run)
        run.wait_event("assigned", timeout_s=60, count=2)
        everyone = [run.pid, *pids.values()]
        assert {os.getpgid(pid) for pid in everyone} == {run.pid}
        os.killpg(run.pid, signal.SIGSTOP)  # kill -STOP -- -PGID; Ctrl-Z's SIGTSTP alike
        _wait_states(everyone, stopped=True)
        os.killpg(run.pid, signal.SIGCONT)
        _wait_states(everyone, stopped=False)
        os.killpg(run.pid, signal.SIGTERM)  # a group or tree kill: readers get it twice
        assert run.process.wait(timeout=60) == 0, run.tail()
        wait_gone(list(pids.values()))
        stopped = run.wait_event("instance_stopped", timeout_s=5)
        assert stopped["readers"] == {"r0": 0, "r1": 0}, run.tail()
        assert run.events("stop_forced") == [], run.tail()
        assert {d["reason"] for d in run.events("stopping")} == {"signal"}, run.tail()


def test_a_reader_frozen_past_its_session_timeout_is_a_zombie_its_sibling_replaces(
        broker, tmp_path: Path) -> None:
    """The default path's zombie (issue 32): one reader SIGSTOPped past the session
    timeout while its sibling runs. The instance says which reader is stuck, the sibling
    takes its partitions and exports them, and when the frozen reader resumes, whatever it
    still tries to publish of them is refused and counted (``fenced``, and the
    ``garmexport_fencing_conflicts_total`` of that reader) or dropped as lost; every record
    ends in exactly one row."""
    topic = broker.new_topic(partitions=4)
    root = str(tmp_path / "out")
    produce(broker.bootstrap, topic, 20_000, partitions=4, seed=11, days=1)
    env = exporter_env(broker.bootstrap, topic, root, ACTORS_PARALLELISM=2,
                       SOURCE_GROUP_ID=f"g-{topic}", WRITER_MAX_FILE_AGE_S=3)
    with exporter_runs() as runs:
        run = Exporter(env, tmp_path, "frozen")
        runs.append(run)
        pids = reader_pids(run)
        run.wait_event("assigned", timeout_s=60, count=2)
        run.wait_event("first_record", timeout_s=60, where=lambda d: d["reader"] == "r1")
        # records keep coming while r1 freezes, so it holds files younger than their
        # age limit (3 s) then: a backlog exported and published before the freeze (a
        # loaded machine) left it nothing to be fenced on
        feed, _ = produce_in_background(broker.bootstrap, topic, 4_000, partitions=4,
                                        seed=14, days=1, rate=400)
        time.sleep(2)
        os.kill(pids["r1"], signal.SIGSTOP)
        try:
            said = run.wait_event("reader_not_answering", timeout_s=15)
            assert said["child"] == "r1", said
            code, answer = run.http_get("/health/ready", timeout_s=10)
            assert code == 503 and any(r.startswith("r1: not answering")
                                       for r in json.loads(answer)["reasons"]), answer
            produce(broker.bootstrap, topic, 3_000, partitions=4, seed=12, days=1)
            feed.join(60)
            # the group drops r1 after its session timeout; r0 takes all four partitions
            run.wait_event("assigned", timeout_s=90,
                           where=lambda d: d["reader"] == "r0" and len(d["partitions"]) == 4)
            ends = topic_ends(broker.bootstrap, topic)
            wait_caught_up(root, topic, ends, 120, run.check_alive)
        finally:
            os.kill(pids["r1"], signal.SIGCONT)
        run.wait_event("reader_answering_again", timeout_s=30)
        produce(broker.bootstrap, topic, 1_000, partitions=4, seed=13, days=1)
        ends = topic_ends(broker.bootstrap, topic)
        wait_caught_up(root, topic, ends, 120, run.check_alive)
        fenced = [d for d in run.events("fenced") if d["reader"] == "r1"]
        status, body = run.http_get("/metrics", timeout_s=10)
        counted = by_reader(body, "garmexport_fencing_conflicts_total")["r1"]
        lost = [d for d in run.events("lost") if d["reader"] == "r1"]
        print(f"r1 after its resume: {len(fenced)} publishes fenced, {len(lost)} losses")
        # it noticed it was replaced, one way or the other, and every refusal is counted
        assert fenced or lost, run.tail()
        assert counted == len(fenced), (counted, fenced)
        assert [d for d in run.events("reader_exited")] == [], run.tail()  # one instance still
        assert run.terminate() == 0, run.tail()
        # probes that gave up on the frozen reader are no traceback once it answers late
        assert "Traceback" not in run.log_path.read_text(errors="replace"), run.tail()
    assert_exact(env, ends)
