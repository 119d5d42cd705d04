"""The JVM exporter's Hive tables keep answering the same queries over a half-JVM day.

A day is written half by the JVM exporter (its files, its table: created from its Parquet
types, partitions added per day, no ``kafka_partition``) and half by garmexport (its
decoder, writer and names, in the same ``day=`` directories). garmexport's registration of
the same table adds ``kafka_partition`` (ALTER TABLE ... ADD COLUMNS) and changes no other
column. Queries written for the JVM tables (a count per day, a header-column filter,
``array_contains(tags, ...)``) then count every record of the topic once, heartbeat rows
aside: the JVM's placeholders (only ``timestamp`` and ``kafka_offset`` set) that its users
already filter out.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from garmexport.compaction.hive import add_partitions_sql, create_table_sql, sync_table
from garmexport.hive.tables import columns_of, dataset_schema
from garmexport.pipeline.router import classify
from garmexport.protocol.naming import day_name
from tests.jvm_root import WINDOW, build, generated, write_garmexport

pytestmark = pytest.mark.spark
DB = "garmadon_jvm"


def test_jvm_style_queries_count_each_record_once_over_a_half_jvm_half_garmexport_day(
        spark, tmp_path: Path) -> None:
    records = generated(4000, partitions=2, days=2, seed=8)
    # the JVM exporter wrote the first part of each partition, garmexport the rest: the
    # switch falls in the middle of a day
    jvm = {p: recs[: len(recs) * 3 // 5] for p, recs in records.items()}
    ours = {p: recs[len(recs) * 3 // 5:] for p, recs in records.items()}
    root = tmp_path / "out"
    built = build(root, jvm, rows_per_file=150, heartbeat_every=60)
    write_garmexport(root, ours, rows_per_file=200)

    location = f"file://{root}/fs"
    jvm_file = next(f for f in built.files if f.parts[-3] == "fs")
    jvm_columns = columns_of([pq.read_schema(jvm_file)])
    days = sorted(d.name[4:] for d in (root / "fs").iterdir() if d.name.startswith("day="))
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    spark.sql(create_table_sql(DB, "fs", jvm_columns, location))
    spark.sql(add_partitions_sql(DB, "fs", days, location))

    # garmexport registers the same table: kafka_partition added, nothing else changed
    done = sync_table(spark, DB, "fs", location, columns_of([dataset_schema("fs")]), days)
    assert done == {"columns_added": 1, "partitions_added": 0}
    after = [(r.col_name, r.data_type) for r in spark.sql(f"DESCRIBE {DB}.fs").collect()
             if r.col_name and not r.col_name.startswith("#") and r.col_name != "day"]
    assert after[: len(jvm_columns)] == jvm_columns and after[-1] == ("kafka_partition", "int")

    # what the topic holds, per day, and the JVM's heartbeat rows per day
    want_day: Counter[str] = Counter()
    for p, recs in records.items():
        for r in recs:
            origin, day, reason, _ = classify(r.value, r.kafka_ms, WINDOW)
            if origin == "fs" and reason is None:
                want_day[day_name(day)] += 1
    beats_day: Counter[str] = Counter()
    for f in built.files:
        if f.parts[-3] == "fs":
            t = pq.read_table(f, columns=["application_id", "timestamp"])
            beats_day[f.parent.name[4:]] += t.filter(t.column("application_id").is_null()).num_rows
    assert sum(beats_day.values()) > 0 and set(want_day) == set(days)

    mixed = 0
    for day in days:
        count = spark.sql(f"SELECT count(*) FROM {DB}.fs WHERE day='{day}'").collect()[0][0]
        assert count - beats_day[day] == want_day[day], day
        # the JVM users' heartbeat filter: rows whose header columns are all NULL
        data = spark.sql(f"SELECT count(*) FROM {DB}.fs WHERE day='{day}' AND NOT "
                         "(application_id IS NULL AND container_id IS NULL AND hostname IS "
                         "NULL)").collect()[0][0]
        assert data == want_day[day]
        by_origin = spark.sql(f"SELECT kafka_partition IS NULL AS jvm, count(*) FROM {DB}.fs "
                              f"WHERE day='{day}' AND application_id IS NOT NULL "
                              "GROUP BY 1").collect()
        mixed += len(by_origin) == 2
    assert mixed >= 1, "no day holds rows of both exporters"

    # a header-column filter and array_contains over both halves give the rows pyarrow sees
    want = Counter()
    for f in root.glob("fs/day=*/*"):
        t = pq.read_table(f, columns=["framework", "tags"]).to_pylist()
        want["spark"] += sum(r["framework"] == "SPARK" for r in t)
        want["tagged"] += sum("YARN_MANAGED" in (r["tags"] or []) for r in t)
    got_spark = spark.sql(f"SELECT count(*) FROM {DB}.fs WHERE framework = 'SPARK'").collect()[0][0]
    got_tagged = spark.sql(f"SELECT count(*) FROM {DB}.fs "
                           "WHERE array_contains(tags, 'YARN_MANAGED')").collect()[0][0]
    assert (got_spark, got_tagged) == (want["spark"], want["tagged"])
    assert 0 < got_spark < got_tagged == sum(want_day.values())


def test_compaction_of_a_mixed_day_folds_garmexport_files_and_leaves_jvm_files_alone(
        spark, tmp_path: Path) -> None:
    import hashlib

    from garmexport.compaction.fs import LocalFs
    from garmexport.compaction.job import CompactOptions, run
    from garmexport.pipeline.router import ORIGINS
    from garmexport.verify.jvm_files import heartbeat_mask
    from tests.spark.exporter_like import markers_for

    records = generated(3000, partitions=2, days=2, seed=12)
    jvm = {p: recs[: len(recs) // 2] for p, recs in records.items()}
    ours = {p: recs[len(recs) // 2:] for p, recs in records.items()}
    root = tmp_path / "out"
    built = build(root, jvm, rows_per_file=100, heartbeat_every=80)
    raw = write_garmexport(root, ours, rows_per_file=20)
    # everything garmexport wrote is committed: W of every origin at the partition's end
    now_ms = max(r.kafka_ms for recs in records.values() for r in recs) + 5 * 86_400_000
    markers_for(str(root), {p: {o: recs[-1].offset for o in ORIGINS} for p, recs in records.items()},
                now_ms)
    digest = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in built.files}

    fs = LocalFs(str(root))
    summary = run(spark, fs, CompactOptions(root_uri=fs.uri, lateness_s=3600.0, grace_s=0.0,
                                            target_file_bytes=64 << 20,
                                            sort_columns=("kafka_partition", "kafka_offset"),
                                            codec="zstd", hive=False), now_ms)
    assert summary.files_in == len(raw) and summary.days_compacted > 0
    assert not any(f.exists() for f in raw)
    assert {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in built.files} == digest

    # every record once across the JVM files and the compacted ones, heartbeats aside
    held: Counter[tuple[int, int]] = Counter()
    for f in root.glob("*/day=*/*"):
        if f.name.startswith(("_", ".")):
            continue
        t = pq.read_table(f)
        if "kafka_partition" in t.column_names:  # garmexport's
            held.update(zip(t.column("kafka_partition").to_pylist(),
                            t.column("kafka_offset").to_pylist()))
        else:  # the JVM's: partition in the name
            data = t.filter(pc.invert(heartbeat_mask(t))).column("kafka_offset").to_pylist()
            held.update((int(f.name.split(".")[0]), o) for o in data)
    want = {(p, r.offset) for p, recs in records.items() for r in recs
            if (c := classify(r.value, r.kafka_ms, WINDOW))[0] and not c[0].startswith("_")
            and c[2] is None}
    assert set(held) == want and max(held.values()) == 1


def test_after_a_real_takeover_the_registered_tables_count_each_day_right(
        spark, broker, tmp_path: Path) -> None:
    """The root of a real run: the JVM era written the JVM way, the rest by ``garmexport
    run`` against the broker; every type's table, as the JVM created it and garmexport
    registered it, counts each day's records of the topic, heartbeat rows aside."""
    from tests.integration.harness import (Exporter, exporter_env, exporter_runs, produce,
                                           topic_ends, wait_caught_up)
    from tests.integration.test_jvm_takeover import jvm_era, read_topic

    topic, era = jvm_era(broker, 2)
    cut = {p: recs[: len(recs) * 2 // 3] for p, recs in era.items()}
    root = tmp_path / "out"
    built = build(root, cut, rows_per_file=300, heartbeat_every=500)
    produce(broker.bootstrap, topic, 6000, partitions=2, seed=4, days=2)
    ends = topic_ends(broker.bootstrap, topic)
    env = exporter_env(broker.bootstrap, topic, str(root))
    with exporter_runs() as runs:
        runs.append(Exporter(env, tmp_path, "takeover"))
        wait_caught_up(str(root), topic, ends, timeout_s=240, alive=runs[0].check_alive)
        assert runs[0].terminate() == 0, runs[0].tail()

    want: Counter[tuple[str, str]] = Counter()
    for recs in read_topic(broker.bootstrap, topic).values():
        for r in recs:
            origin, day, reason, _ = classify(r.value, r.kafka_ms, WINDOW)
            if origin and not origin.startswith("_") and reason is None:
                want[(origin, day_name(day))] += 1
    from garmexport.verify.jvm_files import heartbeat_mask

    beats: Counter[tuple[str, str]] = Counter()
    for f in built.files:
        beats[(f.parts[-3], f.parent.name[4:])] += pc.sum(heartbeat_mask(pq.read_table(f))).as_py()
    assert sum(beats.values()) > 0
    db = "garmadon_takeover"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    for origin in sorted({o for o, _ in want}):
        location = f"file://{root}/{origin}"
        days = sorted(d.name[4:] for d in (root / origin).iterdir() if d.name.startswith("day="))
        jvm_files = [f for f in built.files if f.parts[-3] == origin]
        if jvm_files:  # the table the JVM exporter created, then garmexport's registration
            spark.sql(create_table_sql(db, origin, columns_of([pq.read_schema(jvm_files[0])]),
                                       location))
        sync_table(spark, db, origin, location, columns_of([dataset_schema(origin)]), days)
        got = dict(spark.sql(f"SELECT day, count(*) FROM {db}.{origin} GROUP BY day").collect())
        for day in days:
            assert got.get(day, 0) - beats[(origin, day)] == want[(origin, day)], (origin, day)
        assert sum(want[(origin, d)] for d in days) == sum(n for (o, _), n in want.items()
                                                           if o == origin)
