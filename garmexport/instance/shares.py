"""What each reader process of an instance gets, and what the instance's exit code is.

Pure rules, no I/O. A reader is today's exporter, started by the supervisor with a few
settings overridden through ``GARMEXPORT_*`` variables (the last layer of the
configuration, so they win over the file): its share of the instance's memory budget
(``writer.max_buffered_bytes``, ``writer.max_open_files``, and librdkafka's pre-fetch
``kafka.queued.max.messages.kbytes``), its share of ``actors.cores`` plus one as its worker
threads (the extra one lets a reader overlap its writers' decode and encode with its own
routing while another reader holds a core, DESIGN.md 9.8), ``actors.parallelism`` 1 (a
reader never starts readers), and a private metrics server on a free loopback port that it
writes to a file for the supervisor to find.

Invariants: the readers' shares never add up to more than the instance's budget (each
gets at least 1 of a count, so a budget smaller than the readers is the one exception);
the instance's worker threads are at most ``max(cores, readers) + readers`` (so with the
defaults, one reader per CPU, at most twice the CPUs: they grow linearly with the cores,
not as their square), and no reader runs more than ``cores``; the exit code is that of the first reader
that ended badly, 0 only when all ended with 0.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Mapping

from garmexport.settings.config import DEFAULT_KAFKA, Config

PREFETCH_KEY = "queued.max.messages.kbytes"

def reader_name(index: int) -> str:
    """``r0``, ``r1``...: the ``reader`` field of its log lines, the suffix of its instance."""
    return f"r{index}"


def share(total: int, readers: int, index: int) -> int:
    """Reader ``index``'s part of ``total`` split between ``readers``: the remainder goes
    to the first readers, and every reader gets at least 1."""
    base, extra = divmod(total, readers)
    return max(1, base + (1 if index < extra else 0))


def reader_threads(cores: int, readers: int, index: int) -> int:
    """Reader ``index``'s worker threads: its share of the instance's ``cores`` and one
    more, never more than ``cores`` (so one reader alone runs exactly ``cores``)."""
    return min(cores, share(cores, readers, index) + 1)


def reader_settings(config: Config, readers: int, index: int, port_file: str) -> dict[str, str]:
    """The ``GARMEXPORT_*`` variables (without the prefix) that make reader ``index`` of
    ``readers``; ``port_file`` is where it writes its private port."""
    w = config.writer
    prefetch_kb = int(str(config.kafka.get(PREFETCH_KEY, DEFAULT_KAFKA[PREFETCH_KEY])))
    return {
        # librdkafka's pre-fetch is per consumer, outside the writers' budget: shared too
        "KAFKA_QUEUED_MAX_MESSAGES_KBYTES": str(share(prefetch_kb, readers, index)),
        "ACTORS_PARALLELISM": "1",
        "ACTORS_CORES": str(reader_threads(config.actors.worker_threads(), readers, index)),
        "WRITER_MAX_BUFFERED_BYTES": str(share(w.max_buffered_bytes, readers, index)),
        "WRITER_MAX_OPEN_FILES": str(share(w.max_open_files, readers, index)),
        # health and metrics for the supervisor only: never on the operator's address
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORT": "0",
        "METRICS_PORT_FILE": port_file,
    }


def exit_status(returncode: int) -> int:
    """A child's return code as a shell reports it: killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def how_it_ended(name: str, returncode: int) -> str:
    """In words, how the reader ``name`` ended from its return code: "r1 was killed
    (SIGKILL)" for a signal, "r1 exited 1" for a status."""
    if returncode < 0:
        try:
            signame = signal.Signals(-returncode).name
        except ValueError:
            signame = f"signal {-returncode}"
        return f"{name} was killed ({signame})"
    return f"{name} exited {returncode}"


def instance_exit_code(ended: Iterable[int]) -> int:
    """The instance's code from its readers' exit statuses, in the order they ended: the
    first non-zero one (the reader whose failure stopped the others), else 0."""
    return next((code for code in ended if code != 0), 0)


def left_by(status: int, report: Mapping[str, object] | None, killed: bool) -> str:
    """In words, what a reader gave up in an instance's forced stop (a second signal): from
    the ``stop_forced`` fields it wrote (``report``), or why it wrote none. ``status`` is its
    exit status, ``killed`` whether the supervisor had to SIGKILL it."""
    if killed:
        return ("did not exit in time and was killed: its open files were not counted (none "
                "is visible; the next start reads their records again)")
    if report is None:
        if status == 0:
            return "had stopped cleanly: nothing abandoned"
        return f"exited {status} without a report: it had not started exporting"
    files, partitions = report.get("open_files", 0), report.get("partitions", [])
    if not files:
        return "no file open"
    return f"{files} open files not published (partitions {partitions})"
