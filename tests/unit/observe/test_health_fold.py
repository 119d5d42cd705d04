"""The instance's health folds its readers': live only while every reader is live, ready
only while every reader is ready, each reason naming its reader; a reader that does not
answer is not ready at once, and not live only past the live timeout, as one process's
loop."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from garmexport.observe.health import (
    Health, HealthServer, Status, read_port_file, serve, write_port_file,
)
from garmexport.observe.health_fold import ReadersHealth, fold, reader_liveness, reader_status
from garmexport.observe.reader_probe import Answer, ReaderProbe


def test_the_fold_is_ok_only_when_every_reader_is() -> None:
    assert fold([("r0", Status(True)), ("r1", Status(True))]) == Status(True)
    folded = fold([("r0", Status(True, detail=(("hive", "down"),))),
                   ("r1", Status(False, ("store unreachable", "no partition assignment yet")))])
    assert not folded.ok and folded.http_status == 503
    assert folded.reasons == ("r1: store unreachable", "r1: no partition assignment yet")
    assert folded.detail == (("r0.hive", "down"),)


def test_a_reader_answer_becomes_its_status() -> None:
    body = json.dumps({"ok": False, "reasons": ["broker unreachable: x"]}).encode()
    assert reader_status(Answer("r0", 503, body)) == Status(False, ("broker unreachable: x",))
    assert reader_status(Answer("r0", 503, b"<html>")) == Status(False, ("HTTP 503",))
    assert reader_status(Answer("r0", 200, b'{"ok": true, "reasons": []}')) == Status(True)
    silent = Answer("r0", None, error="not answering: TimeoutError")
    assert reader_status(silent, starting=True) == Status(False, ("not answering: TimeoutError",))
    unborn = Answer("r0", None, error="not serving yet", serving=False)
    assert reader_status(unborn, starting=True).ok and not reader_status(unborn).ok


def test_a_port_file_is_read_back_whole_or_not_at_all(tmp_path: Path) -> None:
    path = str(tmp_path / "r0.port")
    assert read_port_file(path) is None
    write_port_file(path, 41234)
    assert read_port_file(path) == 41234 and list(tmp_path.iterdir()) == [tmp_path / "r0.port"]


@pytest.fixture
def readers(tmp_path: Path) -> Iterator[tuple[dict[str, Health], dict[str, str]]]:
    """r0 and r1 served for real, each on its port; r2 never starts serving."""
    healths, servers, files = {}, [], {}
    for name in ("r0", "r1", "r2"):
        files[name] = str(tmp_path / f"{name}.port")
        healths[name] = health = Health(live_timeout_s=10)
        if name != "r2":
            server: HealthServer = serve("127.0.0.1", 0, CollectorRegistry(), health,
                                         clock=lambda: 100.0)
            servers.append(server)
            write_port_file(files[name], server.port)
    try:
        yield healths, files
    finally:
        for server in servers:
            server.close()


def ready(health: Health) -> None:
    health.tick(100.0)
    health.set_assignment(2)
    health.set_writers_healthy(True)
    health.set_store_reachable(True)


def test_served_readers_are_asked_and_folded(readers) -> None:
    healths, files = readers
    two = ReadersHealth(ReaderProbe({k: files[k] for k in ("r0", "r1")}), started=0.0,
                        start_grace_s=30.0, live_timeout_s=10.0)
    ready(healths["r0"])
    healths["r1"].tick(100.0)
    assert two.liveness(now=500.0).ok
    assert two.readiness().reasons == ("r1: no partition assignment yet",)
    ready(healths["r1"])
    assert two.readiness().ok
    healths["r1"].set_stalled(50.0, "StorageError: disk full")
    live = two.liveness(now=500.0)
    assert not live.ok and live.reasons[0].startswith("r1: no progress for 50.0s")


def test_a_reader_not_serving_yet_is_live_during_the_start_grace_only(readers) -> None:
    healths, files = readers
    for name in ("r0", "r1"):
        ready(healths[name])
    three = ReadersHealth(ReaderProbe(files), started=100.0, start_grace_s=30.0,
                          live_timeout_s=10.0)
    assert three.liveness(now=130.0).ok
    late = three.liveness(now=130.5)
    assert not late.ok and late.reasons == ("r2: not serving yet",)
    assert three.readiness().reasons == ("r2: not serving yet",)


def test_a_silent_reader_is_live_for_the_live_timeout_after_its_last_answer() -> None:
    silent = Answer("r0", None, error="not answering: TimeoutError")
    within = reader_liveness(silent, silent_s=9.5, live_timeout_s=10.0)
    assert within.ok and within.detail == (
        ("not_answering", "for 9.5s, live until 10s: not answering: TimeoutError"),)
    past = reader_liveness(silent, silent_s=10.5, live_timeout_s=10.0)
    assert past == Status(False, ("not answering: TimeoutError (silent 10.5s > live timeout "
                                  "10s)",))
    # an answer is the reader's own judgement, however long it was silent before
    assert reader_liveness(Answer("r0", 200, b'{"ok": true}'), 99.0, 10.0) == Status(True)


def test_a_reader_that_stopped_serving_is_not_ready_and_not_live_past_the_live_timeout(
        tmp_path: Path) -> None:
    health = Health(live_timeout_s=10)
    health.tick(100.0)
    server = serve("127.0.0.1", 0, CollectorRegistry(), health, clock=lambda: 100.0)
    write_port_file(str(tmp_path / "r0.port"), server.port)
    now = [50.0]  # the probe's clock and the one liveness is asked with
    probe = ReaderProbe({"r0": str(tmp_path / "r0.port")}, timeout_s=1.0,
                        clock=lambda: now[0])
    gone = ReadersHealth(probe, started=0.0, start_grace_s=1e9, live_timeout_s=10.0)
    assert gone.liveness(now=now[0]).ok  # heard at 50
    server.close()  # its port file stays: the reader is gone
    status = gone.readiness()
    assert not status.ok and status.reasons[0].startswith("r0: not answering")
    assert gone.liveness(now=60.0).ok
    status = gone.liveness(now=60.5)
    assert not status.ok and status.reasons[0].startswith("r0: not answering"), status
    assert status.reasons[0].endswith("(silent 10.5s > live timeout 10s)"), status


def test_a_reader_that_never_answered_is_silent_since_the_start(tmp_path: Path) -> None:
    server = serve("127.0.0.1", 0, CollectorRegistry(), Health(live_timeout_s=10))
    write_port_file(str(tmp_path / "r0.port"), server.port)
    server.close()  # it said where it serves, and never answered
    never = ReadersHealth(ReaderProbe({"r0": str(tmp_path / "r0.port")}, timeout_s=1.0),
                          started=0.0, start_grace_s=1e9, live_timeout_s=10.0)
    assert never.liveness(now=10.0).ok and not never.liveness(now=10.5).ok
