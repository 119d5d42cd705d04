"""What each storage backend is told, typed: built once from ``[output]``.

``Config.output`` holds every backend option under a prefixed key (``hdfs_*``, ``s3_*``);
:func:`from_output` regroups them per backend, so the backends receive checked, typed
values and no default is written twice (the defaults live in :mod:`garmexport.settings.config`
alone). An empty string in ``[output]`` means "not set" and becomes ``None`` here.

==========================  ========================================================
``[output]`` key            option
==========================  ========================================================
``hdfs_user``               :attr:`WebHdfsOptions.user`
``hdfs_http_port``          :attr:`WebHdfsOptions.http_port`
``hdfs_timeout_s``          :attr:`WebHdfsOptions.timeout_s`
``hdfs_attempts``           :attr:`WebHdfsOptions.attempts`
``hdfs_retry_initial_s``    :attr:`WebHdfsOptions.retry_initial_s`
``hdfs_retry_max_s``        :attr:`WebHdfsOptions.retry_max_s`
``hdfs_ca_file``            :attr:`WebHdfsOptions.ca_file`
``hdfs_kerberos``           :attr:`WebHdfsOptions.kerberos` (``None`` when false)
``hdfs_kerberos_*``         :class:`KerberosOptions`
``s3_*``                    :class:`S3Options`
==========================  ========================================================
"""

from __future__ import annotations

import dataclasses

from garmexport.settings.config import OutputConfig, shown


@dataclasses.dataclass(frozen=True)
class KerberosOptions:
    """SPNEGO credentials: a keytab (tickets fetched and renewed by garmexport into a
    private ticket cache), or a ticket cache that something else fills (kinit, k5start)."""

    principal: str | None  # None: the keytab's first principal, or the cache's own
    keytab: str | None     # None: no keytab; the ticket cache is renewed with `kinit -R`
    ccache: str | None     # None: a private cache (keytab) or the default one (no keytab)
    renew_s: float         # seconds between renewals (sooner if the ticket would expire)


@dataclasses.dataclass(frozen=True)
class WebHdfsOptions:
    user: str | None        # None: the process user (or the Kerberos principal)
    http_port: int          # NameNode HTTP port of an hdfs:// root
    timeout_s: float        # socket timeout of one request
    attempts: int           # tries of one idempotent request
    retry_initial_s: float  # first pause between those tries
    retry_max_s: float      # longest pause between those tries
    ca_file: str | None     # CA certificates (PEM) of swebhdfs://; None: certifi's bundle
    kerberos: KerberosOptions | None  # None: no Kerberos (hdfs_kerberos = false)


@dataclasses.dataclass(frozen=True, repr=False)
class S3Options:
    endpoint_url: str | None  # None: AWS_ENDPOINT_URL, else AWS
    region: str | None        # None: AWS_DEFAULT_REGION, else us-east-1
    access_key_id: str | None  # None: botocore's credential chain
    secret_access_key: str | None
    addressing_style: str     # path | virtual | auto
    attempts: int             # botocore's attempts per call (standard retry mode)
    timeout_s: float          # connect and read timeout of one call

    def __repr__(self) -> str:  # never the credentials
        body = ", ".join(f"{f.name}={shown(f.name, getattr(self, f.name))!r}"
                         for f in dataclasses.fields(self))
        return f"S3Options({body})"


@dataclasses.dataclass(frozen=True)
class StorageOptions:
    webhdfs: WebHdfsOptions
    s3: S3Options


def from_output(output: OutputConfig) -> StorageOptions:
    """The options of every backend, from the ``[output]`` section."""
    o = output
    kerberos = KerberosOptions(
        principal=o.hdfs_kerberos_principal or None, keytab=o.hdfs_kerberos_keytab or None,
        ccache=o.hdfs_kerberos_ccache or None, renew_s=o.hdfs_kerberos_renew_s,
    ) if o.hdfs_kerberos else None
    return StorageOptions(
        webhdfs=WebHdfsOptions(
            user=o.hdfs_user or None, http_port=o.hdfs_http_port, timeout_s=o.hdfs_timeout_s,
            attempts=o.hdfs_attempts, retry_initial_s=o.hdfs_retry_initial_s,
            retry_max_s=o.hdfs_retry_max_s, ca_file=o.hdfs_ca_file or None,
            kerberos=kerberos),
        s3=S3Options(
            endpoint_url=o.s3_endpoint_url or None, region=o.s3_region or None,
            access_key_id=o.s3_access_key_id or None,
            secret_access_key=o.s3_secret_access_key or None,
            addressing_style=o.s3_addressing_style, attempts=o.s3_attempts,
            timeout_s=o.s3_timeout_s))


def defaults() -> StorageOptions:
    """The options a default ``[output]`` gives."""
    return from_output(OutputConfig())
