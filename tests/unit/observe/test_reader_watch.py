"""The supervisor's watch: a reader that stops answering is said once, with its partitions,
and again when it answers; meanwhile nobody waits for it (issue 32, item 3: each scrape
and health check took the probe's 2 s per stuck reader, and nothing was logged)."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from garmexport.observe.health import READY_PATH, Health, serve, write_port_file
from garmexport.observe.reader_probe import Answer, ReaderProbe
from garmexport.observe.reader_watch import Heard, ReaderWatch, transition

READY = b'{"ok": true, "reasons": [], "detail": {"partitions": "2, 3"}}'


def test_a_reader_is_said_silent_once_and_answering_once() -> None:
    heard, event = transition(Heard(), Answer("r1", 200, READY), now=5.0)
    assert heard == Heard(5.0, "2, 3", False) and event is None
    silent, event = transition(heard, Answer("r1", None, error="timed out"), now=9.0)
    assert silent == Heard(5.0, "2, 3", True) and event == "silent"
    assert transition(silent, Answer("r1", None, error="timed out"), now=11.0) == (silent, None)
    back, event = transition(silent, Answer("r1", 503, b'{"ok": false}'), now=12.0)
    assert back == Heard(12.0, "", False) and event == "answering"  # any HTTP answer
    # a reader still starting (no port yet) is not silent
    assert transition(Heard(), Answer("r1", None, serving=False), now=1.0) == (Heard(), None)


def test_a_stuck_reader_is_logged_then_answered_for_at_once_until_it_answers(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    health = Health(live_timeout_s=10)
    health.set_detail("partitions", "2, 3")
    server = serve("127.0.0.1", 0, CollectorRegistry(), health)
    stuck = socket.socket()  # accepts connections (the kernel does) and never answers
    stuck.bind(("127.0.0.1", 0))
    stuck.listen(8)
    port_file = str(tmp_path / "r1.port")
    probe = ReaderProbe({"r1": port_file}, timeout_s=0.5)
    watch = ReaderWatch(probe, {"r1": 4242})
    caplog.set_level(logging.INFO)
    try:
        write_port_file(port_file, server.port)
        watch.check("r1", time.monotonic())  # answers: its partitions are known
        write_port_file(port_file, stuck.getsockname()[1])  # now it is stuck
        watch.check("r1", time.monotonic())
        [said] = [r for r in caplog.records if r.getMessage() == "reader_not_answering"]
        fields = said.garmexport_fields  # type: ignore[attr-defined]  # log_event's
        assert said.levelno == logging.WARNING and fields["child"] == "r1", fields
        assert fields["pid"] == 4242 and fields["partitions"] == "2, 3", fields
        started = time.monotonic()
        answer = probe.get("r1", READY_PATH)
        assert time.monotonic() - started < 0.1, "a scrape waited for a silent reader"
        assert answer.status is None and answer.error.startswith("not answering for"), answer
        watch.check("r1", time.monotonic())  # still stuck: not said again
        assert len([r for r in caplog.records if r.getMessage() == "reader_not_answering"]) == 1
        write_port_file(port_file, server.port)  # it answers again
        watch.check("r1", time.monotonic())
        [again] = [r for r in caplog.records if r.getMessage() == "reader_answering_again"]
        assert again.garmexport_fields["child"] == "r1"  # type: ignore[attr-defined]
        assert probe.get("r1", READY_PATH).status == 503  # asked: its own answer (no assignment)
    finally:
        stuck.close()
        server.close()


def said(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "reader_not_answering"]


def test_a_clean_stop_is_not_a_reader_that_stopped_answering(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A reader closes its server on its way out of a stop, and is reaped a moment later:
    neither is a stuck reader (a clean stop of a Marathon app logged
    ``reader_not_answering ... the instance is not live nor ready`` at WARNING)."""
    health = Health(live_timeout_s=10)
    server = serve("127.0.0.1", 0, CollectorRegistry(), health)
    port_file = str(tmp_path / "r1.port")
    write_port_file(port_file, server.port)
    probe = ReaderProbe({"r1": port_file, "r2": str(tmp_path / "r2.port")}, timeout_s=0.5)
    gone = {"r2"}
    asked: list[str] = []
    real_get = probe.get

    def get(name: str, path: str, ask_silent: bool = False) -> Answer:
        asked.append(name)
        return real_get(name, path, ask_silent=ask_silent)

    probe.get = get  # type: ignore[method-assign]  # count the questions, answer for real
    watch = ReaderWatch(probe, {"r1": 4242, "r2": 4343}, every_s=0.05,
                        ended=lambda name: name in gone)
    # the logger's own level: another test of the worker may have set garmexport's to INFO
    caplog.set_level(logging.DEBUG, logger="garmexport.observe.reader_watch")
    watch.start()
    try:
        deadline = time.monotonic() + 5
        while "r1" not in asked and time.monotonic() < deadline:
            time.sleep(0.02)
        watch.stopping()
        server.close()  # r1 on its way out: its server is gone, its process not yet
        # the watch marks the reader silent, then logs it: wait for the line itself
        deadline = time.monotonic() + 10
        while not said(caplog) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watch.stop()
    assert said(caplog) and all(r.levelno == logging.DEBUG for r in said(caplog)), caplog.text
    assert probe.get("r1", READY_PATH).error.startswith("not answering"), "not marked silent"
    assert "r2" not in asked, "an ended reader was asked"
