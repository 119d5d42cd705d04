"""The Kafka client's own voice: its log lines rate limited, the broker's reachability.

Pure parts (the repeat limiter, the reachability state) run with a fake clock; the
callbacks of :class:`KafkaSignals` are fed what librdkafka hands them. The same path with a
real broker that stops and comes back: tests/integration/test_broker_outage.py.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError

from garmexport.kafka.broker_link import BrokerLink, Change
from garmexport.kafka.client_callbacks import REPEAT_WINDOW_S, KafkaSignals
from garmexport.observe.logs import configure
from garmexport.process.pause_watch import Pause
from garmexport.observe.repeat_limit import RepeatLimiter, repeat_key

FAIL = ("127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused "
        "(after {}ms in state CONNECT)")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    configure("json", "INFO", stream)
    try:
        yield stream
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def docs(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


# --- RepeatLimiter --------------------------------------------------------------------
def test_repeats_within_the_window_are_swallowed_and_counted_on_the_next_line() -> None:
    limiter = RepeatLimiter(window_s=60)
    assert limiter.admit("a", 0.0) == 0
    assert [limiter.admit("a", t) for t in (1.0, 30.0, 59.9)] == [None, None, None]
    assert limiter.admit("b", 10.0) == 0  # another key has a window of its own
    assert limiter.admit("a", 60.0) == 3
    assert limiter.admit("a", 61.0) is None
    assert limiter.admit("a", 200.0) == 1


def test_the_limiter_forgets_the_oldest_key_beyond_its_bound() -> None:
    limiter = RepeatLimiter(window_s=60, max_keys=2)
    for key in "abc":
        assert limiter.admit(key, 0.0) == 0
    assert limiter.admit("a", 1.0) == 0  # "a" was forgotten: it passes as new
    assert limiter.admit("c", 1.0) is None


def test_numbers_do_not_make_a_message_new() -> None:
    assert repeat_key("FAIL", FAIL.format(0)) == repeat_key("FAIL", FAIL.format(1234))
    assert repeat_key("FAIL", "x") != repeat_key("ERROR", "x")


def test_librdkafka_s_own_count_of_held_back_repeats_does_not_make_a_message_new() -> None:
    """librdkafka appends ", N identical error(s) suppressed" to the next line of a message
    it held back; a broker outage under load logged that line as a fourth kind of refusal."""
    first = ("127.0.0.1:39273/bootstrap: Connect to ipv4#127.0.0.1:39273 failed: Connection "
             "refused (after 0ms in state CONNECT)")
    again = first[:-1] + ", 1 identical error(s) suppressed)"
    assert repeat_key("FAIL", again) == repeat_key("FAIL", first)
    assert repeat_key("FAIL", again.replace("1 identical", "17 identical")) == \
        repeat_key("FAIL", first)


def test_a_non_positive_window_is_refused() -> None:
    with pytest.raises(ValueError):
        RepeatLimiter(window_s=0)


# --- BrokerLink ------------------------------------------------------------------------
def test_all_brokers_down_then_a_connection_up_is_one_transition_each_way() -> None:
    link = BrokerLink()
    assert link.connection_up(0.0) is None  # reachable already: nothing to say
    assert link.all_brokers_down("all brokers down", 1.0) == Change(False, "all brokers down")
    assert link.all_brokers_down("again", 2.0) is None
    assert link.partitions_lost("lost", 3.0) is None
    assert link.problem == "all brokers down; lost"
    assert link.connection_up(4.0) is None  # the group is still lost
    assert link.problem == "lost"
    assert link.assigned(6.5) == Change(True, down_s=5.5)
    assert link.problem == ""


def test_lost_partitions_wait_for_an_assignment_even_if_connections_look_up() -> None:
    # a frozen broker keeps its TCP connections open: the statistics still say UP
    link = BrokerLink()
    assert link.partitions_lost("session lost", 0.0) == Change(False, "session lost")
    assert not link.waits_for_connection
    assert link.connection_up(1.0) is None and link.problem == "session lost"
    assert link.assigned(2.0) == Change(True, down_s=2.0)


# --- KafkaSignals ----------------------------------------------------------------------
def relay_fail(signals: KafkaSignals, after_ms: int) -> None:
    settings = signals.settings({})
    settings["logger"].log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#consumer-1",
                           FAIL.format(after_ms))


def test_client_log_lines_become_rate_limited_events(json_lines: io.StringIO) -> None:
    clock = FakeClock()
    signals = KafkaSignals(clock)
    for n in range(20):  # librdkafka retries every few hundred ms
        relay_fail(signals, n)
        clock.now += 0.5
    clock.now += REPEAT_WINDOW_S
    relay_fail(signals, 7)
    first, second = docs(json_lines)
    assert first["event"] == "kafka_log" and first["level"] == "ERROR"
    assert first["logger"] == "garmexport.kafka.signals" and first["facility"] == "FAIL"
    assert first["message"] == FAIL.format(0) and "suppressed" not in first
    assert second["suppressed"] == 19 and second["message"] == FAIL.format(7)


def test_all_brokers_down_and_back_are_one_event_each(json_lines: io.StringIO) -> None:
    clock = FakeClock()
    signals = KafkaSignals(clock)
    settings = signals.settings({})
    assert settings["statistics.interval.ms"] > 0
    assert signals.settings({"statistics.interval.ms": 0})["statistics.interval.ms"] == 0
    error_cb, stats_cb = settings["error_cb"], settings["stats_cb"]
    error_cb(KafkaError(KafkaError._TRANSPORT, "Connect failed"))
    error_cb(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    error_cb(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert signals.problem == "all brokers down: 1/1 brokers are down"
    down = {"brokers": {"b/bootstrap": {"state": "CONNECT", "source": "configured"},
                        "GroupCoordinator": {"state": "UP", "source": "logical"}}}
    stats_cb(json.dumps(down))
    assert signals.problem
    clock.now += 12.0
    down["brokers"]["b/bootstrap"]["state"] = "UP"
    stats_cb(json.dumps(down))
    stats_cb(json.dumps(down))
    assert signals.problem == ""
    lines = docs(json_lines)
    assert [(d["event"], d["level"]) for d in lines] == [
        ("broker_unreachable", "WARNING"), ("broker_reachable", "INFO")]
    assert lines[0]["reason"] == "all brokers down: 1/1 brokers are down"
    assert lines[1]["down_s"] == 12.0


def test_lost_partitions_make_the_broker_unreachable_until_the_next_assignment(
        json_lines: io.StringIO) -> None:
    signals = KafkaSignals(FakeClock())
    signals.lost(4)
    assert "4 partitions" in signals.problem
    signals.assigned()
    assert signals.problem == ""
    assert [d["event"] for d in docs(json_lines)] == ["broker_unreachable", "broker_reachable"]


class StoppedFor:
    """A pause watch that saw the process stopped for ``seconds``, just now."""

    def __init__(self, seconds: float) -> None:
        self.pause = Pause(seconds, ended_at=0.0)

    def recent(self, within_s: float) -> Pause:
        return self.pause


def test_a_session_lost_by_a_pause_is_rejoining_not_an_unreachable_broker(
        json_lines: io.StringIO) -> None:
    clock = FakeClock()
    signals = KafkaSignals(clock, pauses=StoppedFor(8.0))  # type: ignore[arg-type]
    signals.lost(2)
    signals.lost(2)  # a second report of the same loss says nothing new
    assert signals.problem == ""  # the broker is not blamed
    assert signals.rejoining.startswith("group session lost (2 partitions): the process was "
                                        "not scheduled for 8.0 s"), signals.rejoining
    clock.now += 3.0
    signals.assigned()
    assert signals.rejoining == "" and signals.problem == ""
    lines = docs(json_lines)
    assert [(d["event"], d["level"]) for d in lines] == [
        ("session_lost", "WARNING"), ("session_restored", "INFO")], lines
    assert lines[0]["not_scheduled_s"] == 8.0 and lines[1]["down_s"] == 3.0


def test_other_client_errors_are_warnings_with_their_reason(json_lines: io.StringIO) -> None:
    signals = KafkaSignals(FakeClock())
    signals.settings({})["error_cb"](KafkaError(KafkaError._AUTHENTICATION, "bad credentials"))
    [doc] = docs(json_lines)
    assert (doc["event"], doc["level"], doc["code"]) == ("kafka_error", "WARNING", "_AUTHENTICATION")
    assert doc["reason"] == "bad credentials"
    assert signals.problem == ""
