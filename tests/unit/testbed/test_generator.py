"""The event generator: deterministic, labels exact, mix, late and bad shares as asked."""

from __future__ import annotations

import collections
import datetime
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from garmexport.wire import frames
from garmexport.wire.events import EXPORTED, REGISTRY
from garmexport.testbed.generator import (
    BAD_KINDS,
    DAY_MS,
    DEFAULT_MIX,
    Spec,
    Tally,
    generate,
    parse_mix,
)
from tests.hypothesis_profiles import examples

NOW = int(datetime.datetime(2026, 11, 3, 13, tzinfo=datetime.timezone.utc).timestamp() * 1000)
NAMES = {t.name for t in REGISTRY.values()}


def kind_of(value: bytes | None) -> str:
    decoded = frames.decode(value)
    if isinstance(decoded, frames.DecodeFailure):
        return decoded.reason.value
    return REGISTRY[decoded.marker].name


def test_the_same_seed_gives_the_same_records_and_another_seed_does_not():
    spec = Spec(now_ms=NOW, seed=7, bad_share=0.05)
    assert list(generate(spec, 2000)) == list(generate(spec, 2000))
    other = Spec(now_ms=NOW, seed=8, bad_share=0.05)
    assert [r.value for r in generate(spec, 200)] != [r.value for r in generate(other, 200)]


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**32), bad_share=st.sampled_from([0.0, 0.1, 1.0]),
       late_share=st.sampled_from([0.0, 0.5]), partitions=st.integers(1, 6))
def test_every_record_decodes_to_exactly_its_label(seed, bad_share, late_share, partitions):
    spec = Spec(now_ms=NOW, seed=seed, bad_share=bad_share, late_share=late_share,
                partitions=partitions, mix=parse_mix("uniform"))
    for record in generate(spec, 300):
        assert kind_of(record.value) == record.kind
        assert record.key is None
        assert 0 <= record.partition < partitions


def test_the_default_mix_has_every_type_with_container_monitoring_first():
    counts = collections.Counter(r.kind for r in generate(Spec(now_ms=NOW), 50_000))
    assert set(counts) == NAMES  # all 18 exported types and the two non-exported markers
    assert {t.name for t in EXPORTED} <= set(counts)
    assert counts.most_common(1)[0][0] == "CONTAINER_MONITORING_EVENT"
    total_weight = sum(DEFAULT_MIX.values())
    for name, weight in DEFAULT_MIX.items():
        expected = 50_000 * weight / total_weight
        assert abs(counts[name] - expected) < 5 * expected**0.5 + 2, name
    rarest = min(counts, key=counts.__getitem__)
    assert rarest == "FLINK_KAFKA_CONSUMER_EVENT" and counts[rarest] < 50_000 / 1000


def test_a_mix_names_types_by_output_or_type_name_and_leaves_others_out():
    assert parse_mix("fs=3, GC_EVENT=1,path=0.5") == {
        "FS_EVENT": 3.0, "GC_EVENT": 1.0, "PATH_EVENT": 0.5}
    kinds = {r.kind for r in generate(Spec(now_ms=NOW, mix=parse_mix("fs=1,spark_task=1")), 500)}
    assert kinds == {"FS_EVENT", "SPARK_TASK_EVENT"}
    assert set(parse_mix("uniform")) == NAMES
    assert parse_mix("default") == dict(DEFAULT_MIX)


@pytest.mark.parametrize("text", ["fss=1", "fs=x", "fs"])
def test_a_bad_mix_is_rejected_naming_the_part(text):
    with pytest.raises(ValueError, match="fs"):
        parse_mix(text)


@pytest.mark.parametrize("changes", [
    {"partitions": 0}, {"days": 0}, {"late_share": 1.5}, {"bad_share": -0.1},
    {"mix": {"NOPE": 1}}, {"mix": {"FS_EVENT": 0}}, {"partitioner": "random"}])
def test_an_impossible_spec_is_rejected(changes):
    with pytest.raises(ValueError):
        Spec(now_ms=NOW, **changes)


def test_kafka_times_rise_across_the_window_and_events_follow_them():
    records = list(generate(Spec(now_ms=NOW, days=3, late_share=0.0), 5000))
    kafka = [r.timestamp_ms for r in records]
    assert kafka == sorted(kafka) and kafka[-1] == NOW and kafka[0] > NOW - 3 * DAY_MS
    for record in records:
        lag = record.timestamp_ms - frames.read_head(record.value)[1]
        assert 0 <= lag < 5000


def test_late_events_land_on_earlier_days_at_the_asked_share():
    start = NOW - 3 * DAY_MS
    late = past_first_day = 0
    for record in generate(Spec(now_ms=NOW, days=3, late_share=0.2, seed=3), 20_000):
        event_ms = frames.read_head(record.value)[1]
        assert start <= event_ms <= record.timestamp_ms
        kafka_day_start = record.timestamp_ms - record.timestamp_ms % DAY_MS
        if kafka_day_start > start:
            past_first_day += 1
            late += event_ms < kafka_day_start - 5000  # not just jitter across midnight
    assert 0.18 < late / past_first_day < 0.22


def test_bad_records_come_at_the_asked_share_and_of_every_kind():
    records = list(generate(Spec(now_ms=NOW, bad_share=0.1, seed=5), 10_000))
    bad = collections.Counter(r.kind for r in records if r.kind in {k.value for k in BAD_KINDS})
    assert set(bad) == {k.value for k in BAD_KINDS}
    assert 900 < sum(bad.values()) < 1100
    assert any(r.value is None for r in records) and any(r.value == b"" for r in records)


def test_partitions_are_round_robin_or_one_per_application():
    records = list(generate(Spec(now_ms=NOW, partitions=3), 30))
    assert [r.partition for r in records] == [i % 3 for i in range(30)]
    by_app = collections.defaultdict(set)
    for record in generate(Spec(now_ms=NOW, partitions=3, partitioner="application"), 3000):
        decoded = frames.decode(record.value)
        by_app[decoded.header.application_id].add(record.partition)
    assert len(by_app) > 10
    assert all(len(partitions) == 1 for partitions in by_app.values())


def test_records_are_garmadon_sized_with_realistic_headers():
    records = list(generate(Spec(now_ms=NOW), 5000))
    assert 150 <= statistics.median(len(r.value) for r in records) <= 300
    header = frames.decode(records[0].value).header
    assert header.application_id.startswith("application_")
    assert header.hostname


def test_the_tally_separates_types_bad_kinds_and_partitions():
    tally = Tally()
    records = list(generate(Spec(now_ms=NOW, bad_share=0.2, partitions=2), 1000))
    for record in records:
        tally.add(record)
    report = tally.as_dict()
    assert report["total"] == 1000
    assert sum(report["types"].values()) + sum(report["bad"].values()) == 1000
    assert set(report["types"]) <= NAMES
    assert set(report["bad"]) <= {k.value for k in BAD_KINDS}
    assert report["partitions"] == {"0": 500, "1": 500}
