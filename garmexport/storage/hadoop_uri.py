"""The output root as Spark's Hadoop file system reads it, from the exporter's config.

The exporter and ``garmexport compact`` read one configuration. The exporter writes through
WebHDFS (``webhdfs://``, ``swebhdfs://`` or ``hdfs://`` roots), S3 or the local file
system; Spark reads through Hadoop's FileSystem, which wants ``hdfs://`` (RPC), ``s3a://`` or
``file://``. :func:`spark_root` maps one onto the other:

=====================================  ==============================================
``output.root``                        Spark's root (``compaction.hadoop_root`` empty)
=====================================  ==============================================
``/data/out``, ``file:///data/out``    ``file:///data/out``
``webhdfs://nn:9870/data/out``         ``hdfs://nn/data/out``
``swebhdfs://nn:9871/data/out``        ``hdfs://nn/data/out``
``hdfs://nameservice/data/out``        unchanged
``s3://bucket/out``                    ``s3a://bucket/out``
=====================================  ==============================================

The HTTP port of a WebHDFS URI says nothing about the NameNode's RPC port, so the derived
URI names none: Hadoop then uses the NameNode's default RPC port (8020), and a host that is
a logical HA nameservice resolves through Hadoop's HA settings as usual. A WebHDFS root naming
several NameNodes (``webhdfs://nn1:9870,nn2:9870/p``) has no single Hadoop equivalent: set
``compaction.hadoop_root`` (``hdfs://<nameservice>/p``), as for an RPC port that is not
the default. A non-empty ``compaction.hadoop_root`` is used as it is.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from garmexport.errors import ConfigError

KEY = "compaction.hadoop_root"
_WEBHDFS = ("webhdfs", "swebhdfs")


def spark_root(output_root: str, hadoop_root: str = "") -> str:
    """The Hadoop URI of the output root (no trailing ``/``); raises ConfigError naming
    ``compaction.hadoop_root`` when it must be set and is not."""
    if hadoop_root:
        return hadoop_root.rstrip("/")
    scheme = output_root.split("://", 1)[0].lower() if "://" in output_root else ""
    if scheme in ("", "file"):
        path = unquote(urlsplit(output_root).path) if scheme else output_root
        return "file://" + os.path.abspath(path)
    if scheme == "s3":
        return "s3a://" + output_root.split("://", 1)[1].rstrip("/")
    if scheme in _WEBHDFS:
        authority, _, path = output_root.split("://", 1)[1].partition("/")
        hosts = [h for h in authority.split(",") if h]
        if len(hosts) != 1:
            raise ConfigError(
                f"{KEY} is empty and output.root {output_root!r} names {len(hosts)} "
                f"NameNodes: set {KEY} (env GARMEXPORT_COMPACTION_HADOOP_ROOT) to the "
                "hdfs:// URI Spark should use, e.g. hdfs://<nameservice>/" + path)
        host = hosts[0].rsplit(":", 1)[0] if ":" in hosts[0] else hosts[0]
        return f"hdfs://{host}/{path}".rstrip("/")
    return output_root.rstrip("/")
