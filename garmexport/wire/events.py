"""The event type registry: frame type marker -> what the body is and where it goes.

Garmadon puts 20 kinds of events in one topic; the int32 marker at the start of each frame
says which protobuf message the body is (``docs/wire-format.md``). This module is the one
table that knows it, and the only importer of the generated ``garmexport.wire._pb`` code: every
other module reaches message classes through :data:`REGISTRY`.

Invariants (checked by ``tests/unit/wire/test_events.py``):

* :data:`REGISTRY` holds exactly the 20 markers of the wire format; markers 0 (PATH_EVENT)
  and 3 (STATE_EVENT) are known, so not "unknown marker" failures, but have no output.
* :data:`EXPORTED` is the 18 types with an output dataset, in marker order; output names are
  unique and are the dataset directory names.
* Header field names never collide with body field names (nor with the flattened JVM heap
  columns), so one flat row per event is well defined.

The one transform, JVMSTATS_EVENT -> ``jvmstats_heap_event``, is described as data
(:class:`SectionFlattening`) and executed by ``columns``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import Message

from garmexport.wire._pb import (
    container_pb2,
    flink_pb2,
    fs_pb2,
    header_pb2,
    jvm_pb2,
    spark_pb2,
    yarn_pb2,
)

#: The message of bytes 20 .. 20+H of every frame.
HEADER: type[Message] = header_pb2.Header

#: Every generated file, for tools that need descriptors (the ptars handler pool).
FILE_DESCRIPTORS: tuple[FileDescriptor, ...] = tuple(
    m.DESCRIPTOR
    for m in (header_pb2, fs_pb2, jvm_pb2, container_pb2, spark_pb2, yarn_pb2, flink_pb2)
)


@dataclass(frozen=True)
class SectionFlattening:
    """Keep one named section of a ``JVMStatisticsData`` body as int64 columns.

    Output columns are ``properties`` in this order. A column is NULL when the event has no
    section named ``section``, no property of that name in it, or a value that is not an
    optional ``-`` and 1-19 ASCII digits within int64. Sections and properties are read in
    wire order and the last occurrence of a property name wins (protobuf's own rule for a
    repeated assignment); an explicit ``"0"`` stays 0, it is a reported value, not a proto3
    default.
    """

    section: str
    properties: tuple[str, ...]


@dataclass(frozen=True)
class EventType:
    """One kind of Garmadon event.

    ``output`` is the dataset name (directory under the output root), or None for the types
    that are known but not exported. ``flatten`` replaces the body's own fields by the
    flattened section when set.
    """

    marker: int
    name: str
    output: str | None
    message: type[Message]
    flatten: SectionFlattening | None = None

    @property
    def exported(self) -> bool:
        """True when events of this type are written to a dataset."""
        return self.output is not None


_HEAP = SectionFlattening("heap", ("init", "committed", "used", "max"))

_TYPES = (
    EventType(0, "PATH_EVENT", None, fs_pb2.PathEvent),
    EventType(1, "FS_EVENT", "fs", fs_pb2.FsEvent),
    EventType(3, "STATE_EVENT", None, fs_pb2.StateEvent),
    EventType(1000, "GC_EVENT", "gc", jvm_pb2.GCStatisticsData),
    EventType(1001, "JVMSTATS_EVENT", "jvmstats_heap_event", jvm_pb2.JVMStatisticsData, _HEAP),
    EventType(
        2000, "CONTAINER_MONITORING_EVENT", "container", container_pb2.ContainerResourceEvent
    ),
    EventType(3000, "SPARK_STAGE_EVENT", "spark_stage", spark_pb2.StageEvent),
    EventType(3001, "SPARK_STAGE_STATE_EVENT", "spark_stage_state", spark_pb2.StageStateEvent),
    EventType(3002, "SPARK_EXECUTOR_STATE_EVENT", "spark_executor", spark_pb2.ExecutorStateEvent),
    EventType(3003, "SPARK_TASK_EVENT", "spark_task", spark_pb2.TaskEvent),
    EventType(
        3004,
        "SPARK_EXECUTOR_STORAGE_STATUS_EVENT",
        "spark_executor_storage_status",
        spark_pb2.ExecutorStorageStatus,
    ),
    EventType(
        3005,
        "SPARK_RDD_STORAGE_STATUS_EVENT",
        "spark_rdd_storage_status",
        spark_pb2.RDDStorageStatus,
    ),
    EventType(4000, "APPLICATION_EVENT", "application_event", yarn_pb2.ApplicationEvent),
    EventType(4001, "CONTAINER_EVENT", "container_event", yarn_pb2.ContainerEvent),
    EventType(5000, "FLINK_JOB_MANAGER_EVENT", "flink_job_manager", flink_pb2.JobManagerEvent),
    EventType(5001, "FLINK_JOB_EVENT", "flink_job", flink_pb2.JobEvent),
    EventType(5002, "FLINK_TASK_MANAGER_EVENT", "flink_task_manager", flink_pb2.TaskManagerEvent),
    EventType(5003, "FLINK_TASK_EVENT", "flink_task", flink_pb2.TaskEvent),
    EventType(5004, "FLINK_OPERATOR_EVENT", "flink_operator", flink_pb2.OperatorEvent),
    EventType(
        5005, "FLINK_KAFKA_CONSUMER_EVENT", "flink_kafka_consumer", flink_pb2.KafkaConsumerEvent
    ),
)

#: marker -> type, for all 20 known markers.
REGISTRY: Mapping[int, EventType] = MappingProxyType({t.marker: t for t in _TYPES})

#: The 18 exported types, in marker order.
EXPORTED: tuple[EventType, ...] = tuple(
    sorted((t for t in _TYPES if t.exported), key=lambda t: t.marker)
)

_BY_OUTPUT: Mapping[str, EventType] = MappingProxyType(
    {t.output: t for t in EXPORTED if t.output is not None}
)


def by_output(output: str) -> EventType:
    """The exported type whose dataset is ``output``; raises KeyError for any other name."""
    try:
        return _BY_OUTPUT[output]
    except KeyError:
        raise KeyError(f"no exported event type writes dataset {output!r}") from None
