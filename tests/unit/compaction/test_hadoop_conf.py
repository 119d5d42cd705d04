"""What Spark's Hadoop client is told from ``[output]``: the HDFS user, the S3A settings."""

from __future__ import annotations

import pytest

from garmexport.compaction.hadoop_conf import (hadoop_settings, java_options,
                                               kerberos_conf, with_java_options,
                                               with_kerberos)
from garmexport.errors import ConfigError
from garmexport.settings.config import OutputConfig
from garmexport.storage.options import from_output

B = "fs.s3a.bucket.garm."


def test_spark_acts_on_hdfs_as_the_exporters_user_unless_kerberos_names_one() -> None:
    user = from_output(OutputConfig(hdfs_user="garmadon"))
    assert java_options("hdfs://nn:8020/data", user) == ["-DHADOOP_USER_NAME=garmadon"]
    assert java_options("hdfs://nn:8020/data", from_output(OutputConfig())) == []
    assert java_options("s3a://garm/out", user) == []  # a user means nothing to S3
    assert java_options("file:///data", user) == []
    kerberos = from_output(OutputConfig(hdfs_user="garmadon", hdfs_kerberos=True))
    assert java_options("hdfs://nn:8020/data", kerberos, environ={}) == []  # a proxy user


KEYTAB = from_output(OutputConfig(hdfs_kerberos=True, hdfs_kerberos_principal="garm@EX.COM",
                                  hdfs_kerberos_keytab="/etc/garm.keytab"))


def test_with_kerberos_spark_logs_in_as_the_exporters_principal_from_its_keytab() -> None:
    login = {"spark.kerberos.principal": "garm@EX.COM",
             "spark.kerberos.keytab": "/etc/garm.keytab"}
    assert kerberos_conf("hdfs://garm-ha/data", KEYTAB) == login
    assert kerberos_conf("s3a://garm/out", KEYTAB) == {}
    assert kerberos_conf("file:///data", KEYTAB) == {}
    # a ticket cache something else fills: Spark's client reads the default one itself
    cache = from_output(OutputConfig(hdfs_kerberos=True, hdfs_kerberos_principal="garm@EX.COM"))
    assert kerberos_conf("hdfs://garm-ha/data", cache) == {}
    assert kerberos_conf("hdfs://garm-ha/data", from_output(OutputConfig())) == {}
    alone = from_output(OutputConfig(hdfs_kerberos=True, hdfs_kerberos_keytab="/etc/k"))
    with pytest.raises(ConfigError, match="needs output.hdfs_kerberos_principal"):
        kerberos_conf("hdfs://garm-ha/data", alone)


def test_a_principal_or_keytab_given_as_spark_conf_stays_with_its_pair() -> None:
    login = kerberos_conf("hdfs://garm-ha/data", KEYTAB)
    given = {"spark.kerberos.principal": "ops@EX.COM", "spark.master": "local[2]"}
    assert with_kerberos(given, login) == given  # not ops with garm's keytab
    assert with_kerberos({"spark.master": "local[2]"}, login) == {
        **login, "spark.master": "local[2]"}
    assert with_kerberos(given, {}) == given


def test_the_jvm_reads_the_krb5_conf_that_krb5_config_names_for_mits_tools() -> None:
    env = {"KRB5_CONFIG": "/etc/garm/krb5.conf"}
    assert java_options("hdfs://garm-ha/data", KEYTAB, environ=env) == [
        "-Djava.security.krb5.conf=/etc/garm/krb5.conf"]
    assert java_options("hdfs://garm-ha/data", KEYTAB, environ={}) == []  # /etc/krb5.conf
    assert java_options("s3a://garm/out", KEYTAB, environ=env) == []
    # Java reads one file; MIT merges a list
    with pytest.raises(ConfigError, match="KRB5_CONFIG='/a:/b' names several files"):
        java_options("hdfs://garm-ha/data", KEYTAB, environ={"KRB5_CONFIG": "/a:/b"})
    # the user's own -Djava.security.krb5.conf comes later, and so wins
    merged = with_java_options(
        {"spark.driver.extraJavaOptions": "-Djava.security.krb5.conf=/ops/krb5.conf"},
        java_options("hdfs://garm-ha/data", KEYTAB, environ=env))
    assert merged["spark.driver.extraJavaOptions"].endswith("=/ops/krb5.conf")


def test_the_users_own_java_options_come_after_ours_and_so_win() -> None:
    given = {"spark.driver.extraJavaOptions": "-DHADOOP_USER_NAME=ops -Xss4m"}
    merged = with_java_options(given, ["-DHADOOP_USER_NAME=garmadon"])
    assert merged["spark.driver.extraJavaOptions"] == (
        "-DHADOOP_USER_NAME=garmadon -DHADOOP_USER_NAME=ops -Xss4m")
    assert with_java_options({}, []) == {}
    assert given == {"spark.driver.extraJavaOptions": "-DHADOOP_USER_NAME=ops -Xss4m"}


def test_s3a_gets_the_buckets_endpoint_region_addressing_and_keys_from_output() -> None:
    options = from_output(OutputConfig(s3_endpoint_url="http://127.0.0.1:8333",
                                       s3_region="eu-west-3", s3_access_key_id="AK",
                                       s3_secret_access_key="SK"))
    assert hadoop_settings("s3a://garm/compaction/out", options, environ={}) == {
        B + "endpoint": "http://127.0.0.1:8333", B + "connection.ssl.enabled": "false",
        B + "endpoint.region": "eu-west-3", B + "path.style.access": "true",
        B + "access.key": "AK", B + "secret.key": "SK"}


def test_without_output_keys_s3a_follows_the_environment_as_the_exporter_does() -> None:
    options = from_output(OutputConfig(s3_region="", s3_addressing_style="virtual"))
    env = {"AWS_ENDPOINT_URL": "https://s3.example.com", "AWS_DEFAULT_REGION": "us-west-2",
           "AWS_ENDPOINT_URL_S3": "https://other.example.com"}
    assert hadoop_settings("s3a://garm/out", options, environ=env) == {
        B + "endpoint": "https://s3.example.com", B + "endpoint.region": "us-west-2",
        B + "path.style.access": "false"}  # the keys: S3A's own chain (AWS_ACCESS_KEY_ID..)
    auto = from_output(OutputConfig(s3_addressing_style="auto"))
    assert hadoop_settings("s3a://garm/out", auto, environ={}) == {
        B + "endpoint.region": "us-east-1"}


def test_other_roots_get_no_hadoop_settings_and_a_bucketless_one_is_refused() -> None:
    options = from_output(OutputConfig(s3_access_key_id="AK", s3_secret_access_key="SK"))
    assert hadoop_settings("hdfs://nn/out", options, environ={}) == {}
    assert hadoop_settings("file:///out", options, environ={}) == {}
    with pytest.raises(ConfigError, match="'s3a:///out' names no bucket"):
        hadoop_settings("s3a:///out", options, environ={})
