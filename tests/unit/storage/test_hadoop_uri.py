"""The root compaction hands Spark is derived from the exporter's output.root."""

from __future__ import annotations

import argparse

import pytest

from garmexport.cli.compact import add_arguments, options_from
from garmexport.storage.hadoop_uri import spark_root
from garmexport.settings.load import load_config
from garmexport.errors import ConfigError

SHIPPED = "webhdfs://namenode.example.com:9870/data/garmadon"


@pytest.mark.parametrize(("root", "expected"), [
    (SHIPPED, "hdfs://namenode.example.com/data/garmadon"),  # the RPC port is Hadoop's
    ("swebhdfs://nn:9871/data/out/", "hdfs://nn/data/out"),
    ("webhdfs://nn/data", "hdfs://nn/data"),
    ("hdfs://nameservice1/data/out", "hdfs://nameservice1/data/out"),
    ("s3://bucket/prefix/", "s3a://bucket/prefix"),
    ("/data/out/", "file:///data/out"),
    ("file:///data/out", "file:///data/out"),
])
def test_the_exporters_root_maps_to_the_uri_spark_reads(root: str, expected: str) -> None:
    assert spark_root(root) == expected


def test_the_shipped_job_env_gives_spark_an_hdfs_root_or_the_documented_override() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": SHIPPED})
    assert options_from(parser.parse_args([]), config).root_uri == \
        "hdfs://namenode.example.com/data/garmadon"
    config = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": SHIPPED,
                                "GARMEXPORT_COMPACTION_HADOOP_ROOT": "hdfs://nn:9000/data/"})
    assert options_from(parser.parse_args([]), config).root_uri == "hdfs://nn:9000/data"


def test_several_namenodes_or_a_malformed_override_name_the_key() -> None:
    with pytest.raises(ConfigError, match="compaction.hadoop_root.*GARMEXPORT_COMPACTION"):
        spark_root("webhdfs://nn1:9870,nn2:9870/data")
    with pytest.raises(ConfigError, match="compaction.hadoop_root.*GARMEXPORT_COMPACTION"):
        load_config(None, {"GARMEXPORT_COMPACTION_HADOOP_ROOT": "namenode/data"})
