"""What ``garmexport compact`` checks of Spark's Kerberos login once the session runs
(garmexport/compaction/hadoop_conf.py, :func:`check_kerberos`), on the tier's session,
whose Hadoop client has security off as a client without the cluster's core-site.xml has.
The login on a secure cluster: tests/hdfs/test_hdfs_kerberos_compaction.py."""

from __future__ import annotations

from typing import Any

import pytest

from garmexport.compaction import hadoop_conf
from garmexport.errors import ConfigError
from garmexport.settings.config import OutputConfig
from garmexport.storage.options import from_output

pytestmark = pytest.mark.spark


def test_kerberos_in_output_and_a_client_with_security_off_is_a_config_error(
        spark: Any) -> None:
    """Before, Spark logged nobody in and its first RPC failed with the NameNode's
    "SIMPLE authentication is not enabled"; now one error names what to give."""
    kerberos = from_output(OutputConfig(hdfs_kerberos=True,
                                        hdfs_kerberos_principal="garm@GARMEXPORT.TEST",
                                        hdfs_kerberos_keytab="/etc/garm.keytab"))
    with pytest.raises(ConfigError, match=r"output\.hdfs_kerberos is true, but Spark's Hadoop "
                       r"client has hadoop\.security\.authentication = simple: .*HADOOP_CONF_DIR"):
        hadoop_conf.check_kerberos(spark, "hdfs://garm-ha/data", kerberos)
    # nothing to check: a root Kerberos means nothing to, or no Kerberos in [output]
    hadoop_conf.check_kerberos(spark, "file:///data", kerberos)
    hadoop_conf.check_kerberos(spark, "hdfs://garm-ha/data", from_output(OutputConfig()))
