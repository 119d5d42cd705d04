"""The registry is the wire format's table of event types, complete and exact."""

from __future__ import annotations

import pytest

from garmexport.wire import events
from garmexport.wire.events import EXPORTED, REGISTRY, by_output

# marker -> (name, body message full name, output) as in docs/wire-format.md, section 2
WIRE_FORMAT = {
    0: ("PATH_EVENT", "garmexport.PathEvent", None),
    1: ("FS_EVENT", "garmexport.FsEvent", "fs"),
    3: ("STATE_EVENT", "garmexport.StateEvent", None),
    1000: ("GC_EVENT", "garmexport.GCStatisticsData", "gc"),
    1001: ("JVMSTATS_EVENT", "garmexport.JVMStatisticsData", "jvmstats_heap_event"),
    2000: ("CONTAINER_MONITORING_EVENT", "garmexport.ContainerResourceEvent", "container"),
    3000: ("SPARK_STAGE_EVENT", "garmexport.spark.StageEvent", "spark_stage"),
    3001: ("SPARK_STAGE_STATE_EVENT", "garmexport.spark.StageStateEvent", "spark_stage_state"),
    3002: ("SPARK_EXECUTOR_STATE_EVENT", "garmexport.spark.ExecutorStateEvent", "spark_executor"),
    3003: ("SPARK_TASK_EVENT", "garmexport.spark.TaskEvent", "spark_task"),
    3004: ("SPARK_EXECUTOR_STORAGE_STATUS_EVENT", "garmexport.spark.ExecutorStorageStatus",
           "spark_executor_storage_status"),
    3005: ("SPARK_RDD_STORAGE_STATUS_EVENT", "garmexport.spark.RDDStorageStatus",
           "spark_rdd_storage_status"),
    4000: ("APPLICATION_EVENT", "garmexport.ApplicationEvent", "application_event"),
    4001: ("CONTAINER_EVENT", "garmexport.ContainerEvent", "container_event"),
    5000: ("FLINK_JOB_MANAGER_EVENT", "garmexport.flink.JobManagerEvent", "flink_job_manager"),
    5001: ("FLINK_JOB_EVENT", "garmexport.flink.JobEvent", "flink_job"),
    5002: ("FLINK_TASK_MANAGER_EVENT", "garmexport.flink.TaskManagerEvent", "flink_task_manager"),
    5003: ("FLINK_TASK_EVENT", "garmexport.flink.TaskEvent", "flink_task"),
    5004: ("FLINK_OPERATOR_EVENT", "garmexport.flink.OperatorEvent", "flink_operator"),
    5005: ("FLINK_KAFKA_CONSUMER_EVENT", "garmexport.flink.KafkaConsumerEvent",
           "flink_kafka_consumer"),
}  # fmt: skip


def test_registry_holds_exactly_the_twenty_wire_format_markers():
    assert len(REGISTRY) == 20
    assert {
        marker: (t.name, t.message.DESCRIPTOR.full_name, t.output) for marker, t in REGISTRY.items()
    } == WIRE_FORMAT


def test_each_type_is_registered_under_its_own_marker():
    assert all(t.marker == marker for marker, t in REGISTRY.items())


def test_eighteen_types_are_exported_in_marker_order_and_path_and_state_are_not():
    assert len(EXPORTED) == 18
    assert [t.marker for t in EXPORTED] == sorted(m for m, w in WIRE_FORMAT.items() if w[2])
    assert not REGISTRY[0].exported and not REGISTRY[3].exported
    assert all(t.exported for t in EXPORTED)


def test_spark_and_flink_task_events_are_different_messages():
    assert REGISTRY[3003].message is not REGISTRY[5003].message
    assert "attempt_number" in REGISTRY[3003].message.DESCRIPTOR.fields_by_name
    assert "num_records_in_per_second" in REGISTRY[5003].message.DESCRIPTOR.fields_by_name


def test_by_output_finds_each_exported_type_and_rejects_other_names():
    for event_type in EXPORTED:
        assert by_output(event_type.output) is event_type
    with pytest.raises(KeyError):
        by_output("path")


def test_only_jvmstats_is_flattened_to_the_four_heap_columns():
    flattened = [t for t in REGISTRY.values() if t.flatten is not None]
    assert [t.marker for t in flattened] == [1001]
    assert flattened[0].flatten.section == "heap"
    assert flattened[0].flatten.properties == ("init", "committed", "used", "max")


def test_header_field_names_never_collide_with_body_or_trailer_columns():
    header = set(events.HEADER.DESCRIPTOR.fields_by_name)
    trailer = {"timestamp", "kafka_partition", "kafka_offset"}
    assert not header & trailer
    for event_type in REGISTRY.values():
        body = (
            set(event_type.flatten.properties)
            if event_type.flatten
            else set(event_type.message.DESCRIPTOR.fields_by_name)
        )
        assert not header & body, event_type.name
        assert not body & trailer, event_type.name


def test_header_has_the_wire_format_fields_in_tag_order():
    fields = events.HEADER.DESCRIPTOR.fields
    assert [(f.name, f.number) for f in fields] == [
        ("application_id", 1), ("attempt_id", 2), ("application_name", 3), ("username", 4),
        ("container_id", 5), ("hostname", 6), ("pid", 8), ("framework", 9), ("component", 10),
        ("executor_id", 11), ("tags", 12), ("id", 13), ("main_class", 14),
        ("java_version", 15), ("java_feature", 16), ("framework_version", 17),
    ]  # fmt: skip


def test_the_docs_event_table_is_the_registry():
    """docs/wire-format.md section 2 says what the code does: same markers, names, outputs."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[3] / "docs" / "wire-format.md").read_text()
    section = text.split("## 2. Event types", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\w+) \((\w+)\) \| (.+?) \|$", section, re.M)
    documented = {int(m): (name, f"{message} ({proto})", out.strip("`") if "`" in out else None)
                  for m, name, message, proto, out in rows}
    coded = {m: (t.name, f"{t.message.DESCRIPTOR.name} "
                         f"({t.message.DESCRIPTOR.file.name.removesuffix('.proto')})",
                 t.output) for m, t in REGISTRY.items()}
    assert documented == coded
