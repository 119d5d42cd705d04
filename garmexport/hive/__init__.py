"""Hive tables as users query them: one set of table definitions, the metastore client, and the exporter's background partition registration."""
