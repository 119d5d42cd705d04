"""garmexport: export Garmadon events from Kafka to Parquet, exactly once.

Read the modules top to bottom to follow an event: ``frames`` (the wire format),
``events`` (the type registry), ``columns`` (frames to Arrow), ``naming`` (the names that
are the commit record), ``resume`` (restart as a pure function), ``ledger`` (the low
watermark), ``storage`` (the one place that publishes), the actors, and the CLI.
"""

__version__ = "0.1.0"
