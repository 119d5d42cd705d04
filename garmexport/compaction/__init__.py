"""Compaction of closed days into few large files, and the Hive tables over the output.

Read top to bottom: :mod:`.names` (what compaction writes), :mod:`.closed` (when a day is
closed), :mod:`.markers` (W and progress from the exporter's markers), :mod:`.scan` (a day's
files as plan inputs), :mod:`.plan` (pure: which files fold into which outputs),
:mod:`.spark_job` (Spark writes a plan), :mod:`.swap` (journal and roll-forward rules),
:mod:`.recover` (applies them), :mod:`.complete` (``_COMPLETE``), :mod:`.hive` (DDL),
:mod:`.job` (one run), :mod:`.cli_compact` (``garmexport compact``).
"""
