"""The jars Spark needs for ``s3a://``: Hadoop's ``hadoop-aws`` and the AWS SDK v2 it uses.

pip's pyspark ships ``hadoop-client-api``/``-runtime`` 3.5.0 and no S3A. The jars come from
Maven Central (``tests/hdfs/s3a-pom.xml``, which says why it lists the SDK's S3 modules
instead of its 686 MB bundle), fetched once with Maven into the cache directory of the
real HDFS's jars (:func:`tests.hdfs_cluster.cache_dir`) and reused by every later run:
about 35 s and 13 MB the first time. :func:`s3a_jars` gives them as Spark's ``spark.jars``
takes them; without Maven, or when they cannot be fetched, it raises
:class:`tests.hdfs_cluster.HdfsUnavailable` saying why.
"""

from __future__ import annotations

from pathlib import Path

from tests.hdfs_cluster import HERE, cache_dir, maven_jars

POM = HERE / "s3a-pom.xml"


def s3a_jars() -> list[Path]:
    """Every jar of ``hadoop-aws`` and its S3 client (see the module docstring)."""
    return sorted(maven_jars(POM, cache_dir() / "s3a-lib").glob("*.jar"))


def spark_jars() -> str:
    """:func:`s3a_jars` as the value of ``spark.jars``."""
    return ",".join(str(p) for p in s3a_jars())
