"""garmexport: export Garmadon events from Kafka to Parquet, exactly once.

The packages are layers; each imports only the ones below it (the contracts in setup.cfg,
checked by tests/unit/test_architecture.py; DESIGN.md section 8). Read them bottom up to
follow an event from Kafka to a published file:

1. ``wire``: the bytes producers write (``frames``, ``frame_arrays``), the event types
   (``events``), the dataset schemas (``schema``) and the decoders (``columns``).
2. ``protocol``: the commit protocol as pure rules: the names that are the commit record
   (``naming``), restart (``resume``), the low watermark (``ledger``), markers
   (``marker_keeper``), open files and when to flush them (``open_files``, ``flush``),
   back-off (``backoff``), the commit steps (``commit_steps``).
3. What every layer above may use, in layers of their own: ``errors`` (the exception tree)
   and ``process`` (stop signals, usable CPUs, instance ids, dying with a parent, pauses
   of the process); ``settings`` (the typed configuration and
   its loading); ``observe`` (logs, metrics, lag in seconds, health); ``kafka`` (the Kafka
   client's log relay and broker state).
4. ``storage``: the stores behind one interface; the one stage/publish sequence.
5. ``hive``: the Hive table definitions, the metastore client, partition registration.
6. ``pipeline``: the exporter as plain classes: ``router``, ``coordinator`` (the
   partitions of one reader: assignment, reports, markers), ``origin_writer``,
   ``publisher`` (the only code that publishes), ``recovery``, ``marker_writer``,
   ``writer_work`` (the executor that runs the writers' jobs), ``writer_start`` and
   ``writer_order`` (what a writer actor is built on, and what it runs in which order),
   ``poll_policy`` (when the reader polls).
   ``compaction`` stands beside it: the PySpark job over closed days.
7. ``actors``: the thespian actors (each owns state and decides on it, DESIGN.md 7) and the
   composition root (``exporter_parts``);
   ``instance``: the supervisor of an instance's reader processes (``actors.parallelism``);
   ``verify`` below them (every record once, read back; reading a root as every tool
   does), ``repair`` and ``offsets`` (the operator commands' work), ``testbed`` (the demo's
   and the tests' stand-ins: the generator, the embedded broker, local Hive).
8. ``cli``: one module per ``garmexport`` command.
"""

__version__ = "0.1.0"
