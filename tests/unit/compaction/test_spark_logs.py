"""The Spark JVM's output becomes garmexport log lines (no JVM here: the relay's rules)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from garmexport.observe import logs
from garmexport.compaction import spark_logs


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    logs.configure("json", "INFO", stream)
    spark_logs.set_python_levels("WARN")
    try:
        yield stream
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        spark_logs.set_python_levels("ERROR")


def test_the_driver_gets_the_packaged_log4j2_file_beside_the_users_java_options() -> None:
    conf = spark_logs.session_conf({"spark.driver.extraJavaOptions": "-Dderby.system.home=/x"},
                                   "WARN")
    java = conf["spark.driver.extraJavaOptions"]
    assert java.startswith("-Dderby.system.home=/x ")
    assert f"-Dlog4j2.configurationFile={spark_logs.CONFIG_FILE}" in java
    assert "-Dgarmexport.spark.level=WARN" in java
    assert conf["spark.ui.showConsoleProgress"] == "false"
    text = Path(spark_logs.CONFIG_FILE).read_text()
    assert "JsonTemplateLayout" in text and "${sys:garmexport.spark.level:-ERROR}" in text
    # what the user sets wins
    own = spark_logs.session_conf({"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile"
                                   "=/etc/l.xml", "spark.ui.showConsoleProgress": "true"}, "ERROR")
    assert own == {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=/etc/l.xml",
                   "spark.ui.showConsoleProgress": "true"}


def test_jvm_records_and_raw_lines_become_events_at_their_level(captured: io.StringIO) -> None:
    record = {"ts": 1, "level": "WARN", "logger": "org.apache.hadoop.hive.conf.HiveConf",
              "message": 'HiveConf of name "x" does not exist', "exc": "java.io.IOException\n\tat"}
    spark_logs.relay_line(json.dumps(record) + "\n")
    spark_logs.relay_line(json.dumps({**record, "level": "INFO"}) + "\n")  # below WARN
    spark_logs.relay_line("WARNING: Using incubator modules: jdk.incubator.vector\n")
    spark_logs.relay_line("Error: Could not find or load main class x\n")
    spark_logs.relay_line("\n")
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert [(e["level"], e["event"]) for e in lines] == [
        ("WARNING", "spark_log"), ("WARNING", "jvm_output"), ("ERROR", "jvm_output")]
    assert lines[0]["jvm_logger"] == record["logger"] and lines[0]["message"] == \
        record["message"] and lines[0]["exc"] == record["exc"]
    assert lines[2]["line"] == "Error: Could not find or load main class x"
