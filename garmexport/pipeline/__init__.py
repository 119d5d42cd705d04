"""The exporter as plain classes with their I/O (Kafka, Parquet, store); no actors."""
