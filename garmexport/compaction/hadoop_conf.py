"""How Spark's Hadoop client reaches the output root as the exporter does.

The exporter and ``garmexport compact`` read one ``[output]``; the exporter reaches the
root through its own backends (WebHDFS, botocore), Spark through Hadoop's ``FileSystem``
(``hdfs://``, ``s3a://``: :mod:`garmexport.storage.hadoop_uri`). What the exporter is told
in ``[output]``, Spark's client must be told too, or the two act differently on one root:

- **HDFS user** (:func:`java_options`). With simple authentication (``hdfs_kerberos``
  false) the exporter writes as ``output.hdfs_user`` (WebHDFS ``user.name``); Hadoop's
  client acts as the OS user unless told otherwise. Compaction then made its files and
  ``_compaction/`` as another user than the one owning the root: a root of mode 755 owned
  by ``hdfs_user`` refuses that user's mkdir, and where it can write (a superuser), the
  relaunch that finishes a killed swap through WebHDFS, as ``hdfs_user``
  (:mod:`.before_spark`), was refused the deletes and left the swap to Spark (seen on a
  real NameNode: tests/hdfs/test_hdfs_compaction.py). The driver JVM gets
  ``-DHADOOP_USER_NAME=<hdfs_user>``, which Hadoop reads when the environment has no
  ``HADOOP_USER_NAME`` (a variable the operator sets wins). With Kerberos the user is the
  ticket's principal and ``hdfs_user`` a proxy user: nothing is added.
- **Kerberos** (:func:`kerberos_conf`, :func:`java_options`, :func:`check_kerberos`). With
  ``hdfs_kerberos`` and a keytab the exporter gets its tickets as ``hdfs_kerberos_principal``
  from ``hdfs_kerberos_keytab`` (:mod:`garmexport.storage.kerberos`); Spark's client had no
  login at all and every RPC failed with "Client cannot authenticate via:[TOKEN,
  KERBEROS]" (seen on the secure HA cluster: tests/hdfs/test_hdfs_kerberos_compaction.py).
  The session gets ``spark.kerberos.principal`` and ``spark.kerberos.keytab``: Spark's
  SparkSubmit logs the driver in from them before the session starts (local mode too,
  unlike standalone), and Hadoop's client logs in again from the keytab as tickets end.
  Java reads no ``KRB5_CONFIG``: where the environment names one krb5.conf for MIT's
  tools, the driver JVM gets ``-Djava.security.krb5.conf`` of the same file (a
  ``java.security.krb5.conf`` the user gives in ``spark.driver.extraJavaOptions`` wins).
  The keytab's path and the principal are no secret; the keys stay in the file. Hadoop's
  client turns Kerberos on from ``hadoop.security.authentication`` in the cluster's
  ``core-site.xml`` (``HADOOP_CONF_DIR``), not from Spark's settings: without it Spark
  logs nobody in, which :func:`check_kerberos` turns into a ConfigError saying so.
  Without a keytab Spark's client reads the default ticket cache (``KRB5CCNAME``), as the
  exporter does when ``hdfs_kerberos_ccache`` is empty.
- **S3** (:func:`hadoop_settings`): per-bucket S3A settings for the root's bucket,
  ``fs.s3a.bucket.<bucket>.*``: the endpoint (``s3_endpoint_url``, else
  ``AWS_ENDPOINT_URL``, then ``AWS_ENDPOINT_URL_S3``, as the exporter's S3 backend and
  botocore take it), the region (``s3_region``, else ``AWS_DEFAULT_REGION``), path-style
  requests (``s3_addressing_style = "path"``: most S3-compatible stores need it), the key
  pair when ``[output]`` gives one (else S3A's own chain: ``AWS_ACCESS_KEY_ID``...).
  S3A's retries and timeouts stay its own (``s3_attempts`` and ``s3_timeout_s`` are
  botocore's, and S3A retries at two levels). :func:`apply` sets them in the running
  session's Hadoop configuration, never on the JVM's command line, where ``ps`` would
  show the secret; a ``--spark-conf spark.hadoop.<key>`` given for the same key wins.
- **The file system itself** (:func:`check_scheme`). pip's pyspark has no S3A classes:
  ``hadoop-aws`` (the version of pyspark's ``hadoop-client-api``, 3.5.0) and the AWS SDK v2
  must be put on Spark's class path (docs/storage.md, Compaction). Without them the run stops
  at once with a ConfigError that says so, instead of a Java stack trace from its first
  file call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from garmexport.errors import ConfigError
from garmexport.storage.options import StorageOptions

#: the Maven coordinates docs/storage.md (Compaction) tells s3a:// users to add
HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.5.0"


def scheme(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def java_options(root_uri: str, options: StorageOptions,
                 environ: Mapping[str, str] | None = None) -> list[str]:
    """JVM options of the driver for ``root_uri`` (the Spark root): the HDFS user, or with
    Kerberos the krb5.conf that ``KRB5_CONFIG`` names. ConfigError when it names several
    (MIT merges them, Java reads one)."""
    webhdfs = options.webhdfs
    if scheme(root_uri) != "hdfs":
        return []
    if webhdfs.kerberos is None:
        return [f"-DHADOOP_USER_NAME={webhdfs.user}"] if webhdfs.user else []
    krb5 = (os.environ if environ is None else environ).get("KRB5_CONFIG", "")
    if not krb5:
        return []  # Java reads /etc/krb5.conf, as MIT's tools do then
    if ":" in krb5:
        raise ConfigError(f"KRB5_CONFIG={krb5!r} names several files: Spark's JVM reads "
                          "one krb5.conf (java.security.krb5.conf); set KRB5_CONFIG to one "
                          "file for `garmexport compact`")
    return [f"-Djava.security.krb5.conf={krb5}"]


def kerberos_conf(root_uri: str, options: StorageOptions) -> dict[str, str]:
    """Spark settings that log the driver in as the exporter logs in to ``root_uri``:
    ``hdfs_kerberos_principal`` from ``hdfs_kerberos_keytab`` (empty without a keytab,
    without Kerberos, and for a root that is not ``hdfs://``)."""
    kerberos = options.webhdfs.kerberos
    if scheme(root_uri) != "hdfs" or kerberos is None or not kerberos.keytab:
        return {}
    if not kerberos.principal:
        raise ConfigError("output.hdfs_kerberos_keytab needs output.hdfs_kerberos_principal "
                          "(the principal whose key the keytab holds)")
    return {"spark.kerberos.principal": kerberos.principal,
            "spark.kerberos.keytab": kerberos.keytab}


def with_kerberos(conf: Mapping[str, str], login: Mapping[str, str]) -> dict[str, str]:
    """``login`` (:func:`kerberos_conf`) under ``conf``: a principal or keytab the user
    gave as ``--spark-conf`` stays, with its pair."""
    if any(key in conf for key in login):
        return dict(conf)
    return {**login, **conf}


def with_java_options(conf: Mapping[str, str], extra: list[str]) -> dict[str, str]:
    """``conf`` with ``extra`` put before the driver's own ``extraJavaOptions`` (the later
    ``-D`` of one name wins, so an option the user gave stays in force)."""
    out = dict(conf)
    if extra:
        key = "spark.driver.extraJavaOptions"
        out[key] = " ".join([*extra, out.get(key, "")]).strip()
    return out


def hadoop_settings(root_uri: str, options: StorageOptions,
                    environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Hadoop settings for ``root_uri``: the S3A options of its bucket (empty elsewhere)."""
    if scheme(root_uri) != "s3a":
        return {}
    env = os.environ if environ is None else environ
    bucket = urlsplit(root_uri).netloc
    if not bucket:
        raise ConfigError(f"the Spark root {root_uri!r} names no bucket")
    s3 = options.s3
    p = f"fs.s3a.bucket.{bucket}."
    out: dict[str, str] = {}
    # the exporter's S3 backend takes these two from the environment when [output] is empty
    # (storage/open.py), and botocore then AWS_ENDPOINT_URL_S3
    endpoint = (s3.endpoint_url or env.get("AWS_ENDPOINT_URL")
                or env.get("AWS_ENDPOINT_URL_S3"))
    if endpoint:
        out[p + "endpoint"] = endpoint
        if endpoint.lower().startswith("http://"):
            out[p + "connection.ssl.enabled"] = "false"
    region = s3.region or env.get("AWS_DEFAULT_REGION")
    if region:
        out[p + "endpoint.region"] = region
    if s3.addressing_style != "auto":
        out[p + "path.style.access"] = "true" if s3.addressing_style == "path" else "false"
    if s3.access_key_id and s3.secret_access_key:
        out[p + "access.key"] = s3.access_key_id
        out[p + "secret.key"] = s3.secret_access_key
    return out


def apply(spark: Any, settings: Mapping[str, str], given: Mapping[str, str]) -> list[str]:
    """Set ``settings`` in the session's Hadoop configuration, except the keys the user
    gave as ``spark.hadoop.<key>`` in ``given``; the keys set."""
    conf = spark._jsc.hadoopConfiguration()
    done = []
    for key, value in settings.items():
        if f"spark.hadoop.{key}" not in given:
            conf.set(key, value)
            done.append(key)
    return done


def check_scheme(spark: Any, root_uri: str, setting: str) -> None:
    """ConfigError when Spark's Hadoop client has no file system for ``root_uri``'s
    scheme (named by ``setting``), with what to add for ``s3a://``."""
    name = scheme(root_uri)
    if name in ("", "file"):
        return
    jvm = spark._jvm
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(
            name, spark._jsc.hadoopConfiguration())
        if name == "s3a":  # the class is named in core-default.xml: load it to know
            jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")
    except Exception as exc:  # noqa: BLE001 - py4j's error of any JVM exception
        java = getattr(exc, "java_exception", None)  # py4j's: the JVM's own exception
        detail = (str(java.toString()) if java is not None else str(exc)).strip()[:300]
        hint = (f": Spark needs {HADOOP_AWS} and the AWS SDK v2 on its class path "
                f"(--spark-conf spark.jars=<jars> or spark.jars.packages={HADOOP_AWS}; "
                "README, Storage backends, Compaction)") if name == "s3a" else ""
        raise ConfigError(f"Spark's root {root_uri!r} (from {setting}): Spark's Hadoop "
                          f"client has no {name}:// file system ({detail}){hint}") from exc


def check_kerberos(spark: Any, root_uri: str, options: StorageOptions) -> None:
    """ConfigError when ``[output]`` says Kerberos for an ``hdfs://`` root and Spark's
    Hadoop client has security off or logged in without Kerberos credentials; else the
    first file call fails with "Client cannot authenticate via:[TOKEN, KERBEROS]"."""
    kerberos = options.webhdfs.kerberos
    if scheme(root_uri) != "hdfs" or kerberos is None:
        return
    ugi = spark._jvm.org.apache.hadoop.security.UserGroupInformation
    if not ugi.isSecurityEnabled():
        raise ConfigError(
            "output.hdfs_kerberos is true, but Spark's Hadoop client has "
            "hadoop.security.authentication = simple: give `garmexport compact` the "
            "cluster's client configuration (HADOOP_CONF_DIR holding its core-site.xml "
            "and hdfs-site.xml)")
    user = ugi.getLoginUser()
    if not user.hasKerberosCredentials():
        source = (f"keytab {kerberos.keytab} as {kerberos.principal}" if kerberos.keytab
                  else "the default ticket cache (KRB5CCNAME; give "
                  "output.hdfs_kerberos_keytab for Spark to log in from a keytab)")
        raise ConfigError(f"Spark's Hadoop client has no Kerberos login ({user.getUserName()}"
                          f" without credentials) from {source}")
