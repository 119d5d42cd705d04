"""Every Kafka client garmexport creates routes librdkafka's lines through logging.

A client built without a ``logger`` prints raw ``%3|...|FAIL|...`` lines on stderr (and
breaks ``log.format = "json"``). The exporter's consumer gets the relay from
:meth:`garmexport.kafka.client_callbacks.KafkaSignals.settings`; every other client from
:func:`garmexport.kafka.client_callbacks.client_log_settings`. This reads the package's source, so a
new client without either fails here, not in an operator's logs.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from confluent_kafka.admin import AdminClient

import garmexport
from garmexport.kafka.client_callbacks import client_log_settings

CLIENTS = {"Consumer", "Producer", "AdminClient"}
# module -> why its client needs no client_log_settings in the call itself
ROUTED_ELSEWHERE = {"kafka/source.py": "KafkaSignals.settings merged into its settings",
                    "settings/kafka_keys.py": "its probe never connects; a logger of its own drops its lines"}


def _client_calls() -> list[tuple[str, int, str]]:
    """(module path, line, source of the call) of every client construction."""
    root = Path(garmexport.__file__).parent
    calls = []
    for path in sorted(root.rglob("*.py")):
        if "_pb" in path.parts:
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in CLIENTS:
                calls.append((str(path.relative_to(root)), node.lineno,
                              ast.get_source_segment(text, node) or ""))
    return calls


def test_every_kafka_client_garmexport_creates_takes_the_log_relay() -> None:
    calls = _client_calls()
    assert len(calls) >= 6, calls  # the scan finds the clients it is meant to check (one
    # admin client constructor since kafka/topics.py builds them all)
    unrouted = [(path, line) for path, line, source in calls
                if "client_log_settings(" not in source and path not in ROUTED_ELSEWHERE]
    assert not unrouted, unrouted


def test_the_settings_give_a_logger_that_an_admin_client_accepts() -> None:
    for quiet in (False, True):
        settings = client_log_settings(quiet)
        assert hasattr(settings["logger"], "log")
        AdminClient({"bootstrap.servers": "127.0.0.1:1", **settings})  # refused keys raise
    assert client_log_settings()["logger"] is client_log_settings()["logger"]  # one relay
    assert isinstance(client_log_settings(quiet=True)["logger"], logging.Logger)
