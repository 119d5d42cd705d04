"""Plausible Garmadon messages for the event generator: headers and bodies from a seeded RNG.

Values look like a YARN cluster's: application and container ids that share a cluster
timestamp, worker host names, Spark/Flink/MapReduce frameworks, JVM heap sections with
digit-string properties. About one field in six is left at its proto3 default, because real
agents leave fields unset and the exporter must write those as NULL.

Everything here is a pure function of the ``random.Random`` passed in: the same seed builds
the same messages, byte for byte.
"""

from __future__ import annotations

import random

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from garmexport.wire.events import HEADER, EventType

CLUSTER_TS = 1_700_000_000_000  # the ResourceManager start time inside YARN ids
_FRAMEWORKS = {  # framework -> (components, versions, main class)
    "SPARK": (("DRIVER", "EXECUTOR"), ("3.5.1", "3.3.2"), "org.apache.spark.deploy.SparkSubmit"),
    "MAPREDUCE": (("APP_MASTER", "MAP", "REDUCE"), ("3.3.6",), "org.apache.hadoop.mapred.YarnChild"),
    "FLINK": (("JOB_MANAGER", "TASK_MANAGER"), ("1.17.2",), "org.apache.flink.yarn.YarnTaskExecutorRunner"),
}
_NAMES = ("daily-aggregation", "sessionize-clicks", "ml-features", "hive-etl", "bid-stream")
_USERS = ("etl", "analytics", "ml-batch", "svc-garmadon")
_JAVA = (("1.8.0_392", 8), ("11.0.21", 11), ("17.0.9", 17))
#: field name -> plausible values, where a generic value would look wrong
_VALUES: dict[str, tuple[str, ...]] = {
    "action": ("READ", "WRITE", "RENAME", "DELETE", "APPEND"),
    "uri": ("hdfs://root", "hdfs://preprod"),
    "collector_name": ("G1 Young Generation", "G1 Old Generation", "PS Scavenge"),
    "cause": ("G1 Evacuation Pause", "Allocation Failure", "Metadata GC Threshold"),
    "type": ("VCORE", "PHYSICAL_MEMORY_BYTES", "VIRTUAL_MEMORY_BYTES", "CPU", "map", "reduce"),
    "state": ("RUNNING", "FINISHED", "FAILED", "KILLED", "ACCEPTED", "active", "completed"),
    "status": ("SUCCESS", "FAILED", "RUNNING"),
    "final_status": ("SUCCEEDED", "FAILED", "KILLED", "UNDEFINED"),
    "queue": ("root.etl", "root.adhoc", "root.ml"),
    "locality": ("PROCESS_LOCAL", "NODE_LOCAL", "RACK_LOCAL", "ANY"),
    "reason": ("", "Container killed by the ApplicationMaster.", "Lost executor"),
}
_FLINK_JOBS = ("bid-stream", "click-join", "fraud-score")


def host(rng: random.Random) -> str:
    return f"dn{rng.randrange(1, 400):04d}.par"


def headers(rng: random.Random, apps: int) -> dict[str, list[tuple[int, bytes]]]:
    """(application number, serialized header) per framework, and "YARN" (ResourceManager).

    ``apps`` applications numbered from 1, each with a few containers; every header of an
    application shares its application id, name, user and framework. YARN headers have an
    attempt id and no container.
    """
    pools: dict[str, list[tuple[int, bytes]]] = {name: [] for name in (*_FRAMEWORKS, "YARN")}
    for app in range(1, apps + 1):
        framework = rng.choice(tuple(_FRAMEWORKS))
        components, versions, main_class = _FRAMEWORKS[framework]
        app_id = f"application_{CLUSTER_TS}_{app:04d}"
        common = dict(application_id=app_id, application_name=rng.choice(_NAMES),
                      username=rng.choice(_USERS))
        attempt = f"appattempt_{CLUSTER_TS}_{app:04d}_000001"
        pools["YARN"].append((app, HEADER(**common, attempt_id=attempt,
                                          component="RESOURCE_MANAGER").SerializeToString()))
        java_version, java_feature = rng.choice(_JAVA)
        for container in range(1, rng.randrange(2, 8)):
            component = components[0] if container == 1 else rng.choice(components[1:] or components)
            header = HEADER(
                **common, container_id=f"container_e07_{CLUSTER_TS}_{app:04d}_01_{container:06d}",
                hostname=host(rng), pid=str(rng.randrange(1000, 65000)), framework=framework,
                component=component, executor_id=str(container - 1) if framework == "SPARK" else "",
                tags=["YARN_MANAGED"], main_class=main_class if container == 1 else "",
                java_version=java_version, java_feature=java_feature,
                framework_version=rng.choice(versions))
            pools[framework].append((app, header.SerializeToString()))
    return pools


def header_family(event_type: EventType) -> tuple[str, ...]:
    """Which header pools events of this type come from (Spark types from Spark JVMs, ...)."""
    if event_type.name.startswith("SPARK_"):
        return ("SPARK",)
    if event_type.name.startswith("FLINK_"):
        return ("FLINK",)
    if event_type.marker in (4000, 4001):
        return ("YARN",)
    return tuple(_FRAMEWORKS)


def body(rng: random.Random, event_type: EventType) -> bytes:
    """One serialized body of ``event_type`` with plausible values."""
    message = event_type.message()
    if event_type.name == "JVMSTATS_EVENT":
        _jvm_sections(rng, message)
    else:
        _fill(rng, message)
    return message.SerializeToString()


def _jvm_sections(rng: random.Random, message: Message) -> None:
    names = ["heap", rng.choice(("nonheap", "metaspace", "code"))]
    if rng.random() < 0.05:
        names.remove("heap")  # some agents report no heap section: the columns are NULL
    for name in names:
        section = message.section.add(name=name)
        used = rng.randrange(1 << 20, 1 << 32)
        for prop, value in (("init", 1 << 28), ("committed", used * 2), ("used", used),
                            ("max", 1 << 33)):
            section.property.add(name=prop, value=str(value))


def _fill(rng: random.Random, message: Message) -> None:
    for field in message.DESCRIPTOR.fields:
        if rng.random() < 1 / 6:
            continue  # left unset: proto3 default, exported as NULL
        if field.is_repeated:
            getattr(message, field.name).extend(
                _scalar(rng, field) for _ in range(rng.randrange(0, 3)))
        else:
            setattr(message, field.name, _scalar(rng, field))


def _scalar(rng: random.Random, field: FieldDescriptor) -> object:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        choices = _VALUES.get(field.name)
        if choices:
            return rng.choice(choices)
        if field.name.endswith(("hostname", "host")):
            return host(rng)
        if field.name == "job_name":
            return rng.choice(_FLINK_JOBS)
        if field.name.endswith("path"):
            return f"/user/{rng.choice(_USERS)}/data/part-{rng.randrange(100000):05d}.parquet"
        return f"{field.name}-{rng.randrange(1000)}"
    if kind == FieldDescriptor.TYPE_ENUM:
        return rng.choice([v.number for v in field.enum_type.values])
    if kind == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if kind in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return round(rng.uniform(0, 100), 3)
    if kind in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32):
        return rng.randrange(0, 10_000)
    # int64/uint64 counters (bytes, ms, records): log-uniform, most are small, a few huge
    return rng.randrange(0, 1 << rng.randrange(1, 36))
