"""What each reader of an instance gets, and the instance's exit code."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garmexport.instance.shares import (
    exit_status, how_it_ended, instance_exit_code, reader_name, reader_settings, reader_threads,
    share,
)
from garmexport.instance.supervisor import reader_env
from garmexport.settings.config import ActorsConfig, Config, WriterConfig
from garmexport.settings.load import load_config


@given(total=st.integers(1, 10**12), readers=st.integers(1, 64))
def test_shares_add_up_to_the_budget_and_each_reader_gets_one_at_least(
        total: int, readers: int) -> None:
    parts = [share(total, readers, k) for k in range(readers)]
    assert min(parts) >= 1 and max(parts) - min(parts) <= 1
    assert sum(parts) == max(total, readers)  # over only when the budget is below 1 each


def test_the_remainder_goes_to_the_first_readers() -> None:
    assert [share(7, 3, k) for k in range(3)] == [3, 2, 2]


@given(cores=st.integers(1, 256), readers=st.integers(1, 64))
def test_an_instance_runs_at_most_cores_plus_readers_threads_and_a_reader_at_most_cores(
        cores: int, readers: int) -> None:
    threads = [reader_threads(cores, readers, k) for k in range(readers)]
    # more readers than cores: each still gets a share of 1, and its extra thread
    assert sum(threads) <= max(cores, readers) + readers
    assert all(min(2, cores) <= t <= cores for t in threads)
    assert reader_threads(cores, 1, 0) == cores  # one reader: exactly the cores


def test_threads_grow_linearly_with_the_cores_when_parallelism_follows_them() -> None:
    # the defaults (parallelism = cores = the usable CPUs): twice the CPUs at most, where
    # the whole cores per reader gave their square (256 threads on 16 CPUs)
    assert [sum(reader_threads(n, n, k) for k in range(n)) for n in (1, 2, 4, 16)] == [
        1, 4, 8, 32]
    assert [reader_threads(3, 2, k) for k in range(2)] == [3, 2]  # the remainder first


def test_a_reader_gets_its_share_of_the_budget_and_the_threads_one_reader_and_a_port() -> None:
    config = Config(writer=WriterConfig(max_buffered_bytes=100, max_open_files=2001),
                    actors=ActorsConfig(cores=4, parallelism=2))
    first = reader_settings(config, 2, 0, "/run/r0.port")
    second = reader_settings(config, 2, 1, "/run/r1.port")
    assert first == {"KAFKA_QUEUED_MAX_MESSAGES_KBYTES": "4096",
                     "ACTORS_PARALLELISM": "1", "ACTORS_CORES": "3",
                     "WRITER_MAX_BUFFERED_BYTES": "50", "WRITER_MAX_OPEN_FILES": "1001",
                     "METRICS_HOST": "127.0.0.1", "METRICS_PORT": "0",
                     "METRICS_PORT_FILE": "/run/r0.port"}
    assert second["ACTORS_CORES"] == "3" and second["WRITER_MAX_OPEN_FILES"] == "1000"
    assert reader_settings(config, 4, 3, "p")["ACTORS_CORES"] == "2"  # 1 of 4 cores, and 1


def test_the_reader_settings_win_over_the_operators_and_load_as_a_config() -> None:
    config = Config(actors=ActorsConfig(cores=2, parallelism=2))
    operator = {"GARMEXPORT_WRITER_MAX_OPEN_FILES": "10", "GARMEXPORT_METRICS_PORT": "9108",
                "GARMEXPORT_SOURCE_TOPIC": "garmadon", "PATH": "/bin"}
    env = reader_env(config, 2, 1, "/run/r1.port", operator)
    assert env["PATH"] == "/bin" and env["GARMEXPORT_SOURCE_TOPIC"] == "garmadon"
    loaded = load_config(None, env)
    assert loaded.actors.readers() == 1 and loaded.actors.worker_threads() == 2
    assert loaded.writer.max_open_files == 1000  # half the default 2000, not the operator's 10
    assert (loaded.metrics.host, loaded.metrics.port) == ("127.0.0.1", 0)
    assert loaded.metrics.port_file == "/run/r1.port"
    assert str(loaded.kafka["queued.max.messages.kbytes"]) == "4096"  # half the pre-fetch
    assert loaded.source.topic == "garmadon"  # the operator's own settings stay


def test_cores_zero_shares_out_the_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("garmexport.settings.config.usable_cpus", lambda: 8)
    config = Config(actors=ActorsConfig(cores=0, parallelism=2))
    assert [reader_settings(config, 2, k, "p")["ACTORS_CORES"] for k in range(2)] == ["5", "5"]


def test_parallelism_zero_means_the_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("garmexport.settings.config.usable_cpus", lambda: 6)
    assert ActorsConfig().readers() == 6 and ActorsConfig(parallelism=1).readers() == 1


@pytest.mark.parametrize("returncode, status", [(0, 0), (1, 1), (2, 2), (-9, 137), (-15, 143)])
def test_a_killed_reader_reports_as_a_shell_would(returncode: int, status: int) -> None:
    assert exit_status(returncode) == status


def test_the_first_reader_that_failed_decides_the_instance_code() -> None:
    assert instance_exit_code([0, 137, 1]) == 137
    assert instance_exit_code([1, 0]) == 1
    assert instance_exit_code([0, 0]) == 0 and instance_exit_code([]) == 0


def test_readers_are_named_by_their_index() -> None:
    assert [reader_name(k) for k in range(3)] == ["r0", "r1", "r2"]


def test_how_a_reader_ended_is_said_in_words() -> None:
    """A killed reader is said to be killed, by which signal (issue 32, item 7: the reason
    read "r1 exited 137")."""
    assert how_it_ended("r1", -9) == "r1 was killed (SIGKILL)"
    assert how_it_ended("r0", -15) == "r0 was killed (SIGTERM)"
    assert how_it_ended("r0", 1) == "r0 exited 1"
    assert how_it_ended("r0", -200) == "r0 was killed (signal 200)"
