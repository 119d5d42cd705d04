"""Checking ``[kafka]`` against the Kafka client itself, at start-up.

``[kafka]`` is passed to librdkafka untouched, so garmexport cannot know every key; the
client does. :func:`check_kafka_settings` builds (and at once closes) a consumer from the
merged settings less the broker list, so that it never connects (the list is a plain
string librdkafka does not check when it is set): librdkafka refuses an unknown key or a
value it cannot parse right there. The refusal becomes a
:class:`~garmexport.errors.ConfigError` that names the key, where it was set (the file or
the ``GARMEXPORT_KAFKA_*`` variable) and, for an unknown key, the closest key the linked
librdkafka knows (read from its own property table, ``rd_kafka_conf_properties_show``; when
that table cannot be read there is no suggestion, the check itself still holds).

Keys librdkafka accepts but ignores for a consumer (producer-only keys) are not errors, nor
are failures that depend on the machine rather than on the settings (a SASL mechanism this
build of the client lacks, a certificate file that is not here): the real client reports
those when it starts.
"""

from __future__ import annotations

import ctypes
import difflib
import functools
import glob
import logging
import os
import re
from collections.abc import Callable, Mapping

from garmexport.settings.config import shown
from garmexport.errors import ConfigError

# librdkafka refuses a setting while the client is configured ('No such configuration
# property: "k"', 'Invalid value "v" for configuration property "k"', 'Configuration property
# "k" value 5 is outside allowed range ...', 'Expected bool value for "k" ...'); a failure
# while the client is created reads 'Failed to create consumer: ...'.
_UNKNOWN = re.compile(r'^No such configuration property: "([^"]+)"')
_QUOTED = re.compile(r'"([^"]*)"')
_MACHINE = "Failed to create"
_BROKER_LISTS = ("bootstrap.servers", "metadata.broker.list")
# The probe's own librdkafka lines are dropped: its failure is reported by the one error it
# raises, and the real client reports the same warnings when it starts.
_PROBE_LOG = logging.getLogger(f"{__name__}.probe")
_PROBE_LOG.addHandler(logging.NullHandler())
_PROBE_LOG.propagate = False


def check_kafka_settings(settings: Mapping[str, object], where: Mapping[str, str],
                         env_var: Callable[[str], str]) -> None:
    """Raise ConfigError if librdkafka refuses ``settings`` (a consumer's, group.id set).

    ``where[key]`` says who set ``key`` ("defaults", a file path, "environment variable
    X"); ``env_var(key)`` is the variable that would set ``key``, for the suggestion.
    """
    from confluent_kafka import Consumer, KafkaException

    probe = {k: v for k, v in settings.items() if k not in _BROKER_LISTS}
    try:
        Consumer({**probe, "logger": _PROBE_LOG}).close()
    except KafkaException as exc:
        refusal = _refusal(exc.args[0].str(), settings, where, env_var)
        if refusal is not None:
            raise refusal from None


def _refusal(message: str, settings: Mapping[str, object], where: Mapping[str, str],
             env_var: Callable[[str], str]) -> ConfigError | None:
    """The ConfigError for a refused key or value; None for a failure of another kind
    (a SASL mechanism this build lacks, a certificate file missing on this machine): those
    depend on where the command runs, and the real client reports them when it starts."""
    if message.startswith(_MACHINE):
        return None
    unknown = _UNKNOWN.match(message)
    named = [q for q in _QUOTED.findall(message) if q in settings]
    key = unknown.group(1) if unknown else named[-1] if named else None
    if key is None or key not in settings:
        return None
    origin = where.get(key, "defaults")
    if unknown:
        close = difflib.get_close_matches(key, sorted(known_keys()), n=1, cutoff=0.6)
        hint = ""
        if close:
            hint = (f" (did you mean {env_var(close[0])}?)" if origin.startswith("environment")
                    else f" (did you mean {close[0]!r}?)")
        return ConfigError(f"kafka.{key} in {origin}: unknown librdkafka key{hint}")
    value = settings[key]
    why = " ".join(message.split())
    if shown(key, value) != value:
        why = why.replace(str(value), str(shown(key, value)))
    return ConfigError(f"kafka.{key} = {shown(key, value)!r} in {origin}: "
                       f"librdkafka refuses this value: {why}")


@functools.cache
def known_keys() -> frozenset[str]:
    """Every property name of the linked librdkafka (global and topic), or empty if its
    table cannot be read (a client linked in a way ctypes cannot reach)."""
    try:
        return frozenset(re.findall(r"^([a-z0-9_.]+)\s+\|", _properties_table(), re.M))
    except (OSError, AttributeError, IndexError, UnicodeDecodeError):
        return frozenset()


def _properties_table() -> str:
    """librdkafka's own property table (markdown), from the library confluent_kafka loaded."""
    import confluent_kafka

    here = os.path.dirname(confluent_kafka.__file__)
    bundled = sorted(glob.glob(os.path.join(here, os.pardir, "confluent_kafka.libs",
                                            "librdkafka*")))
    lib = ctypes.CDLL(bundled[0] if bundled else "librdkafka.so.1")
    libc = ctypes.CDLL(None)
    libc.tmpfile.restype = ctypes.c_void_p
    for name in ("fflush", "fileno", "fclose"):
        getattr(libc, name).argtypes = [ctypes.c_void_p]
    lib.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
    stream = libc.tmpfile()
    if not stream:
        raise OSError("tmpfile() failed")
    try:
        lib.rd_kafka_conf_properties_show(stream)
        libc.fflush(stream)
        fd = libc.fileno(stream)
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        libc.fclose(stream)
    return b"".join(chunks).decode()
