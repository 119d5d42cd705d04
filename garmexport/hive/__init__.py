"""Hive tables: one set of definitions, the metastore client (and the relay of its thrift
library's log lines, ``thrift_logs``), partition registration."""
