"""Decode throughput per event type: native (upb check + ptars + Arrow) vs plain-Python reference.

Run ``python tests/bench/bench_decode.py [--events N] [--batch N] [--types fs,gc]``. Frames
carry realistic values (YARN ids, host names, metric-sized integers, a heap section with the
four properties among others); a pool of 1000 distinct frames per type is cycled to reach N,
and decoding is timed in batches of ``--batch`` records, as the reader hands them over.
Prints events/s per type and decoder, and the native/reference ratio.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from google.protobuf.descriptor import FieldDescriptor as F  # noqa: E402

from garmexport.wire import columns, columns_reference  # noqa: E402
from garmexport.wire.events import EXPORTED, HEADER, by_output  # noqa: E402
from garmexport.wire.frames import encode  # noqa: E402

WORDS = ["SUCCESS", "RUNNING", "NODE_LOCAL", "ResultTask", "default", "hdfs", "read", "alice"]


def text(rnd: random.Random, name: str) -> str:
    app = f"{1700000000000 + rnd.randrange(10)}_{rnd.randrange(10000):04d}"
    if "host" in name:
        return f"worker-{rnd.randrange(500):03d}.dc1.example.com"
    if name.endswith(("application_id", "job_id")):
        return f"application_{app}"
    if name.endswith("container_id"):
        return f"container_e07_{app}_01_{rnd.randrange(1000):06d}"
    if "path" in name or "url" in name or name == "uri":
        return f"hdfs://nn/user/alice/data/part-{rnd.randrange(100000):05d}"
    if rnd.random() < 0.1:
        return ""  # some fields are unset in real events
    return rnd.choice(WORDS) + ("" if rnd.random() < 0.5 else f"-{rnd.randrange(100)}")


def fill(message, rnd: random.Random):
    """Set every field of ``message`` to a plausible value; returns the message."""
    for field in message.DESCRIPTOR.fields:
        if field.is_repeated and field.type == F.TYPE_STRING:
            getattr(message, field.name).extend(rnd.choice(WORDS) for _ in range(rnd.randrange(4)))
        elif field.type == F.TYPE_STRING:
            setattr(message, field.name, text(rnd, field.name))
        elif field.type in (F.TYPE_INT64, F.TYPE_UINT64):
            number = rnd.choice([0, rnd.randrange(10**4), rnd.randrange(10**12)])
            setattr(message, field.name, number)
        elif field.type == F.TYPE_INT32:
            setattr(message, field.name, rnd.randrange(1000))
        elif field.type in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
            setattr(message, field.name, round(rnd.random() * 1000, 3))
        elif field.type == F.TYPE_BOOL:
            setattr(message, field.name, rnd.random() < 0.5)
        elif field.type == F.TYPE_ENUM:
            setattr(message, field.name, rnd.choice(field.enum_type.values).number)
    return message


def jvm_body(message_class, rnd: random.Random):
    body = message_class()
    for name in ("heap", "nonheap", "compile", "threads"):
        section = body.section.add(name=name)
        for prop in ("init", "committed", "used", "max", "count"):
            section.property.add(name=prop, value=str(rnd.randrange(10**10)))
    return body


def frames_for(event_type, count: int, seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    pool = []
    for i in range(1000):
        header = fill(HEADER(), rnd)
        body = (
            jvm_body(event_type.message, rnd)
            if event_type.flatten
            else fill(event_type.message(), rnd)
        )
        pool.append(encode(event_type.marker, 1700000000000 + i, header, body))
    return [pool[i % len(pool)] for i in range(count)]


def rate(decoder, event_type, values: list[bytes], batch: int) -> float:
    """Events per second of ``decoder`` over ``values``, cut in batches of ``batch``."""
    offsets = list(range(len(values)))
    decoder(event_type, values[:batch], 0, offsets[:batch])  # warm caches and handler pools
    start = time.perf_counter()
    for lo in range(0, len(values), batch):
        table, failures = decoder(event_type, values[lo : lo + batch], 0, offsets[lo : lo + batch])
        assert not failures and table.num_rows == len(values[lo : lo + batch])
    return len(values) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--types", default="", help="comma-separated output names; all if empty")
    args = parser.parse_args(argv)
    types = [by_output(name) for name in args.types.split(",") if name] or list(EXPORTED)
    print(f"{'event type':32} {'native ev/s':>12} {'reference ev/s':>15} {'ratio':>6}")
    for event_type in types:
        values = frames_for(event_type, args.events)
        native = rate(columns.decode_batch, event_type, values, args.batch)
        reference = rate(columns_reference.decode_batch, event_type, values, args.batch)
        ratio = native / reference
        print(f"{event_type.output:32} {native:12,.0f} {reference:15,.0f} {ratio:6.1f}")


if __name__ == "__main__":
    main()
