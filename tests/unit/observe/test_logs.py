"""Event logging: one line per event, greppable key=value fields, secrets masked."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import warnings
from collections.abc import Iterator

import pytest

from garmexport.settings.config import MASK as REDACTED
from garmexport.observe.logs import JsonFormatter, configure, log_event, redact


@pytest.fixture
def restore_root() -> Iterator[None]:
    root, actors = logging.getLogger(), logging.getLogger("Thespian")
    handlers, level, actor_level = list(root.handlers), root.level, actors.level
    hooks = sys.excepthook, threading.excepthook
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        actors.setLevel(actor_level)
        sys.excepthook, threading.excepthook = hooks
        logging.captureWarnings(False)


def capture(fmt: str, level: str = "INFO") -> io.StringIO:
    stream = io.StringIO()
    configure(fmt=fmt, level=level, stream=stream)
    return stream


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


@pytest.mark.usefixtures("restore_root")
def test_text_line_holds_level_logger_event_and_fields() -> None:
    stream = capture("text")
    log_event(logging.getLogger("garmexport.flush"), "file_published", type="fs", partition=3,
              rows=1200)
    [line] = lines(stream)
    stamp, rest = line.split(" ", 1)
    assert stamp.endswith("Z") and "T" in stamp
    assert rest == "INFO garmexport.flush file_published type=fs partition=3 rows=1200"


@pytest.mark.usefixtures("restore_root")
def test_text_values_with_spaces_quotes_or_newlines_stay_on_one_quoted_field() -> None:
    stream = capture("text")
    log_event(logging.getLogger("t"), "storage_retry", error='refused "x"\nagain', path="",
              day="2026-11-02", settings={"a": 1})
    [line] = lines(stream)
    assert 'error="refused \\"x\\"\\nagain"' in line
    assert 'path=""' in line and "day=2026-11-02" in line
    assert 'settings="{\\"a\\": 1}"' in line


@pytest.mark.usefixtures("restore_root")
def test_json_line_carries_the_same_keys() -> None:
    stream = capture("json")
    log_event(logging.getLogger("garmexport.run"), "assigned", partitions=[0, 1], ts="field")
    [line] = lines(stream)
    record = json.loads(line)
    assert record["level"] == "INFO" and record["logger"] == "garmexport.run"
    assert record["event"] == "assigned" and record["partitions"] == [0, 1]
    # A field named like a built-in key does not overwrite it.
    assert record["ts"].endswith("Z") and record["ts_"] == "field"


@pytest.mark.usefixtures("restore_root")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_secrets_never_reach_a_line(fmt: str) -> None:
    stream = capture(fmt)
    log_event(logging.getLogger("t"), "config_loaded", password="hunter2",
              kafka={"bootstrap.servers": "k:9092", "sasl.password": "hunter2",
                     "ssl": {"ssl.key.password": "hunter2"}},
              aws_secret_access_key="hunter2", api_token="hunter2")
    text = stream.getvalue()
    assert "hunter2" not in text
    assert "k:9092" in text and REDACTED in text


def test_redact_keeps_ordinary_fields_and_masks_nested_secrets() -> None:
    fields = {"key": b"k", "topic": "garmadon",
              "kafka": {"sasl.oauthbearer.config": "x", "ssl.key.pem": "y", "acks": "all"}}
    assert redact(fields) == {"key": b"k", "topic": "garmadon",
                              "kafka": {"sasl.oauthbearer.config": REDACTED,
                                        "ssl.key.pem": REDACTED, "acks": "all"}}


@pytest.mark.usefixtures("restore_root")
def test_a_traceback_is_one_field_of_one_line() -> None:
    stream = capture("text")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("t").exception("writer_failed")
    [line] = lines(stream)
    assert line.split(" ")[3] == "writer_failed" and "RuntimeError: boom" in line


@pytest.mark.usefixtures("restore_root")
def test_a_value_the_traceback_module_cannot_walk_still_makes_one_json_line() -> None:
    # librdkafka's KafkaError, carried as an exception's value, has no __suppress_context__:
    # logging's own formatter raised on it and printed '--- Logging error ---' to stderr
    # (a logger of its own: pytest's capture handler formats with logging's own formatter)
    from confluent_kafka import KafkaError

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("t.kafka_error")
    log.addHandler(handler)
    log.propagate = False
    err = KafkaError(KafkaError._TRANSPORT, "broker down")
    try:
        log.error("uncaught_exception", exc_info=(KafkaError, err, None))
    finally:
        log.removeHandler(handler)
    [line] = stream.getvalue().splitlines()
    doc = json.loads(line)
    assert doc["event"] == "uncaught_exception" and "broker down" in doc["exc"]


@pytest.mark.usefixtures("restore_root")
def test_level_filters_events_and_a_second_configure_replaces_the_first() -> None:
    configure(fmt="text", stream=io.StringIO())
    stream = capture("json", level="WARNING")
    log_event(logging.getLogger("t"), "quiet", n=1)
    log_event(logging.getLogger("t"), "loud", level=logging.WARNING, n=2)
    assert [json.loads(line)["event"] for line in lines(stream)] == ["loud"]
    assert sum(getattr(h, "_garmexport", False) for h in logging.getLogger().handlers) == 1


@pytest.mark.usefixtures("restore_root")
def test_the_actor_library_stays_at_warning_unless_asked() -> None:
    # thespian logs every actor message in full at DEBUG: 231 MB in 45 s with level DEBUG
    actors = logging.getLogger("Thespian")
    stream = capture("json", level="DEBUG")
    actors.debug('Actor "%s" got message "%s"', "writer", "x" * 100_000)
    actors.warning("Actor total creation failure")
    log_event(logging.getLogger("garmexport.reader"), "file_published", level=logging.DEBUG)
    assert [json.loads(line)["event"] for line in lines(stream)] == [
        "Actor total creation failure", "file_published"]

    stream = io.StringIO()
    configure("json", "DEBUG", stream, actor_level="debug")
    actors.debug("asked for")
    configure("json", "INFO", stream, actor_level="DEBUG")
    actors.debug("never below the process level")
    assert [json.loads(line)["event"] for line in lines(stream)] == ["asked for"]


@pytest.mark.usefixtures("restore_root")
def test_debug_lines_have_short_fields_and_other_lines_whole_ones() -> None:
    stream = capture("json", level="DEBUG")
    log = logging.getLogger("garmexport.reader")
    log_event(log, "partition_recovered", level=logging.DEBUG, partition=3,
              seeks={p: p * 1000 for p in range(2000)}, note="y" * 5000)
    log_event(log, "failure", level=logging.ERROR, traceback="z" * 5000)
    log.debug("%s", "w" * 5000)
    short, whole, plain = (json.loads(line) for line in lines(stream))
    assert short["partition"] == 3
    assert short["note"] == "y" * 300 + "...(+4700 chars)"
    assert short["seeks"].startswith('{"0": 0, "1": 1000') and short["seeks"].endswith("chars)")
    assert whole["traceback"] == "z" * 5000
    assert len(plain["event"]) < 350


@pytest.mark.usefixtures("restore_root")
def test_warnings_and_uncaught_exceptions_are_json_lines_too() -> None:
    stream = capture("json")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("deprecated thing", DeprecationWarning, stacklevel=1)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    thread = threading.Thread(target=lambda: 1 / 0, name="worker")
    thread.start()
    thread.join()
    warned, main, other = (json.loads(line) for line in lines(stream))
    assert warned["logger"] == "py.warnings" and "deprecated thing" in warned["event"]
    assert main["event"] == "uncaught_exception" and main["level"] == "ERROR"
    assert "RuntimeError: boom" in main["exc"]
    assert other["event"] == "uncaught_exception" and other["thread"] == "worker"
    assert "ZeroDivisionError" in other["exc"]


@pytest.mark.parametrize("kwargs", [{"fmt": "xml"}, {"level": "LOUD"}, {"actor_level": "LOUD"}])
def test_unknown_format_or_level_is_refused(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        configure(stream=io.StringIO(), **kwargs)


@pytest.mark.usefixtures("restore_root")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_fields_given_to_configure_lead_every_line(fmt: str) -> None:
    stream = io.StringIO()
    configure(fmt=fmt, stream=stream, fields={"reader": "r1"})
    log_event(logging.getLogger("garmexport.run"), "assigned", partitions=[2])
    logging.getLogger("garmexport").warning("plain")
    first, second = lines(stream)
    if fmt == "json":
        assert json.loads(first)["reader"] == "r1" and json.loads(second)["reader"] == "r1"
        assert json.loads(first)["partitions"] == [2]
    else:
        assert first.endswith("assigned reader=r1 partitions=[2]") and second.endswith("plain reader=r1")
