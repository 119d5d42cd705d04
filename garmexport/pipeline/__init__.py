"""The exporter as plain classes with their I/O (Kafka, Parquet, storage); no actor library."""
