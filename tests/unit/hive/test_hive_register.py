"""Partition registration: the pure rule, and the worker against an in-memory metastore.

The real metastore is in tests/hive; here a dict stands in so that the worker's timing,
back-off and bookkeeping can be checked quickly and exactly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from garmexport.settings.config import HiveConfig
from garmexport.errors import MetastoreError, TableMissing
from garmexport.hive.register import Registrar, due_in, wanted
from garmexport.observe.metrics import Metrics


class MemoryMetastore:
    """Tables and partitions in dicts; fails every call while ``down``."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self.partitions: dict[tuple[str, str], set[str]] = {}
        self.down = False
        self.calls = 0

    def _check(self) -> None:
        self.calls += 1
        if self.down:
            raise MetastoreError("connection refused")

    def ensure_database(self, database: str) -> None:
        self._check()

    def columns(self, database: str, table: str) -> list[tuple[str, str]] | None:
        self._check()
        return self.tables.get((database, table))

    def create_table(self, database: str, table: str, columns: Sequence[tuple[str, str]],
                     location: str) -> None:
        self._check()
        self.tables.setdefault((database, table), list(columns))
        self.partitions.setdefault((database, table), set())

    def add_columns(self, database: str, table: str, columns: Sequence[tuple[str, str]]) -> None:
        self._check()
        self.tables[(database, table)] += list(columns)

    def add_partitions(self, database: str, table: str, days: Sequence[tuple[str, str]]) -> None:
        self._check()
        if (database, table) not in self.tables:  # as the thrift adapter says it
            raise TableMissing(f"no such table {database}.{table}")
        self.partitions[(database, table)].update(d for d, _ in days)

    def drop_table(self, database: str, table: str) -> None:
        del self.tables[(database, table)], self.partitions[(database, table)]

    def close(self) -> None:
        pass


def registrar(store: MemoryMetastore, delay_s: float = 0.05, queue_max: int = 100
              ) -> tuple[Registrar, CollectorRegistry]:
    registry = CollectorRegistry()
    cfg = HiveConfig(metastore_uri="thrift://127.0.0.1:1", register_delay_s=delay_s,
                     retry_max_s=0.2)
    return Registrar(cfg, "file:///out", Metrics.create(registry), lambda: store,
                     queue_max=queue_max), registry


def wait_for(cond, timeout_s: float = 5.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_each_new_dataset_day_is_wanted_once_and_quarantine_files_go_to_their_own() -> None:
    offered = {("gc", "2026-11-01")}
    got = wanted("gc", [("d", "2026-11-01"), ("d", "2026-11-02"), ("q", "2026-11-02"),
                        ("d", "2026-11-02")], offered)
    assert got == [("gc", "2026-11-02"), ("_quarantine", "2026-11-02")]


def test_a_round_is_due_after_the_delay_and_not_before_the_back_off_ends() -> None:
    assert due_in(None, 0.0, 60.0, 100.0) is None
    assert due_in(90.0, 0.0, 60.0, 100.0) == 50.0
    assert due_in(30.0, 0.0, 60.0, 100.0) == -10.0
    assert due_in(30.0, 130.0, 60.0, 100.0) == 30.0


def test_published_days_become_partitions_of_created_tables_after_the_delay() -> None:
    store = MemoryMetastore()
    reg, registry = registrar(store, delay_s=0.3)
    reg.start()
    try:
        started = time.monotonic()
        reg.offer("gc", [("d", "2026-11-01"), ("q", "2026-11-01")])
        reg.offer("gc", [("d", "2026-11-02")])
        reg.offer("fs", [("d", "2026-11-02")])
        wait_for(lambda: registry.get_sample_value("garmexport_hive_pending_partitions") == 0
                 and store.partitions.get(("garmadon", "fs")))
        assert time.monotonic() - started >= 0.3
        assert store.partitions == {("garmadon", "gc"): {"2026-11-01", "2026-11-02"},
                                    ("garmadon", "quarantine"): {"2026-11-01"},
                                    ("garmadon", "fs"): {"2026-11-02"}}
        assert ("kafka_offset", "bigint") in store.tables[("garmadon", "gc")]
        assert ("value", "binary") in store.tables[("garmadon", "quarantine")]
        assert registry.get_sample_value("garmexport_hive_partitions_registered_total",
                                         {"table": "gc"}) == 2
        calls = store.calls
        reg.offer("gc", [("d", "2026-11-02")])  # already offered: no metastore call
        time.sleep(0.5)
        assert store.calls == calls
    finally:
        reg.stop(5.0)


def test_a_metastore_that_is_down_delays_registration_and_loses_nothing() -> None:
    store = MemoryMetastore()
    store.down = True
    reg, registry = registrar(store)
    reg.start()
    try:
        reg.offer("gc", [("d", "2026-11-01")])
        wait_for(lambda: (registry.get_sample_value(
            "garmexport_hive_registration_failures_total") or 0) >= 3)
        assert "hive registration failing" in reg.problem
        assert registry.get_sample_value("garmexport_hive_pending_partitions") == 1
        assert registry.get_sample_value("garmexport_hive_oldest_pending_seconds") > 0
        reg.offer("gc", [("d", "2026-11-02")])
        store.down = False
        wait_for(lambda: store.partitions.get(("garmadon", "gc")) == {"2026-11-01", "2026-11-02"})
        wait_for(lambda: reg.problem == "")
        assert registry.get_sample_value("garmexport_hive_oldest_pending_seconds") == 0
    finally:
        reg.stop(5.0)


def test_a_table_lacking_columns_of_this_schema_gains_them() -> None:
    store = MemoryMetastore()
    store.create_table("garmadon", "gc", [("application_id", "string")], "file:///out/gc")
    reg, registry = registrar(store)
    reg.start()
    try:
        reg.offer("gc", [("d", "2026-11-01")])
        wait_for(lambda: store.partitions[("garmadon", "gc")] == {"2026-11-01"})
        names = [n for n, _ in store.tables[("garmadon", "gc")]]
        assert names[0] == "application_id" and "kafka_offset" in names
        assert len(names) == len(set(names))
        assert registry.get_sample_value("garmexport_hive_columns_added_total",
                                         {"table": "gc"}) == len(names) - 1
    finally:
        reg.stop(5.0)


def test_a_table_dropped_while_running_is_made_again_with_the_days_registered_in_it() -> None:
    store = MemoryMetastore()
    reg, registry = registrar(store)
    reg.start()
    try:
        reg.offer("gc", [("d", "2026-11-01")])
        wait_for(lambda: store.partitions.get(("garmadon", "gc")) == {"2026-11-01"})
        store.drop_table("garmadon", "gc")  # an operator, or a restored older backup
        reg.offer("gc", [("d", "2026-11-02")])
        wait_for(lambda: store.partitions.get(("garmadon", "gc")) == {"2026-11-01", "2026-11-02"})
        assert "kafka_offset" in [n for n, _ in store.tables[("garmadon", "gc")]]
        wait_for(lambda: registry.get_sample_value("garmexport_hive_pending_partitions") == 0)
        assert reg.problem == ""
    finally:
        reg.stop(5.0)


def test_stop_registers_what_is_pending_at_once() -> None:
    store = MemoryMetastore()
    reg, _ = registrar(store, delay_s=3600.0)
    reg.start()
    reg.offer("gc", [("d", "2026-11-01")])
    time.sleep(0.1)
    assert not store.partitions
    reg.stop(5.0)
    assert store.partitions[("garmadon", "gc")] == {"2026-11-01"}


def test_an_offer_that_finds_the_queue_full_is_offered_again_by_the_next_file() -> None:
    store = MemoryMetastore()
    reg, _ = registrar(store, queue_max=1)  # not started: nothing drains the queue
    reg.offer("gc", [("d", "2026-11-01"), ("d", "2026-11-02")])
    reg.start()
    wait_for(lambda: store.partitions.get(("garmadon", "gc")) == {"2026-11-01"})
    reg.offer("gc", [("d", "2026-11-01"), ("d", "2026-11-02")])
    wait_for(lambda: store.partitions[("garmadon", "gc")] == {"2026-11-01", "2026-11-02"})
    reg.stop(5.0)


def test_partitions_are_registered_at_the_root_compaction_uses() -> None:
    # A WebHDFS root is written over HTTP but read by Hive and Spark through Hadoop's RPC
    # client: the registered locations must be the hdfs:// URI that compaction uses too.
    from garmexport.settings.load import load_config
    from garmexport.hive.register import start_registrar

    config = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": "webhdfs://nn:9870/garmadon",
                                "GARMEXPORT_HIVE_METASTORE_URI": "thrift://127.0.0.1:1"})
    registrar = start_registrar(config, Metrics.create(CollectorRegistry()))
    assert registrar is not None
    try:
        assert registrar._root == "hdfs://nn/garmadon"
    finally:
        registrar.stop(0.1)
