"""Hive tables: one set of definitions, the metastore client, partition registration."""
