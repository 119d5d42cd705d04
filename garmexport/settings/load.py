"""Reading and checking configuration: a TOML file and the environment become a Config.

Every rejected value raises :class:`~garmexport.errors.ConfigError` whose message names the
key (``section.key``), the value (masked if it is a secret) and where it came from (the file
path, or the environment variable). Unknown sections and keys are errors with a
did-you-mean, so a typo in a Marathon variable cannot be silently ignored.

Environment mapping: ``GARMEXPORT_<SECTION>_<KEY>`` (upper case) sets ``<section>.<key>``;
``GARMEXPORT_KAFKA_<KEY>`` sets the librdkafka key ``<key>`` lower-cased with ``_`` -> ``.``
(``GARMEXPORT_KAFKA_SASL_PASSWORD`` -> ``sasl.password``). ``GARMEXPORT_CONFIG`` (the file
path, read by the CLI) is the only other variable with the prefix.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import re
import tomllib
import typing
from collections.abc import Callable, Iterator, Mapping

from garmexport.settings.config import DEFAULT_KAFKA, KAFKA, SECTIONS, Config, KafkaSettings, shown
from garmexport.errors import ConfigError
from garmexport.settings.kafka_keys import check_kafka_settings

ENV_PREFIX = "GARMEXPORT_"
CONFIG_PATH_ENV = "GARMEXPORT_CONFIG"
_BOOLS = {"true": True, "1": True, "yes": True, "on": True,
          "false": False, "0": False, "no": False, "off": False}
# librdkafka keys garmexport derives from its own keys: setting them twice would be ambiguous.
_KAFKA_DERIVED = {"group.id": "source.group_id"}
# Keys that once existed and are gone: an error that says why, not "unknown key".
RETIRED = {
    ("protocol", "revoke_timeout_s"): "removed: the code never read it; a revoke drops the "
    "partition's open files at once (DESIGN.md 4.8), there is nothing to wait for. Delete it",
}


# Keys that moved: the old name is still read, with a warning naming the new one.
RENAMED = {
    ("writer", "batch_max_records"): ("source", "poll_max_records"),
    ("writer", "poll_timeout_s"): ("source", "poll_timeout_s"),
}


def env_name(section: str, key: str) -> str:
    """The environment variable that overrides ``section.key``."""
    return f"{ENV_PREFIX}{section}_{key}".upper().replace(".", "_")


@functools.cache
def _fields(section: str) -> dict[str, tuple[dataclasses.Field, type]]:
    cls = SECTIONS[section]
    hints = typing.get_type_hints(cls)
    return {f.name: (f, hints[f.name]) for f in dataclasses.fields(cls)}


def _error(key: str, value: object, where: str, problem: str) -> ConfigError:
    return ConfigError(f"{key} = {shown(key, value)!r} in {where}: {problem}")


def _did_you_mean(word: str, choices: list[str]) -> str:
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def _from_toml(kind: type, value: object) -> object:
    """``value`` as ``kind``, or raise TypeError; ints widen to float, nothing else converts."""
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is str and isinstance(value, str):
        return value
    if kind == tuple[str, ...] and isinstance(value, list) and all(
            isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"expected {_kind_name(kind)}, got {type(value).__name__}")


def _from_env(kind: type, text: str) -> object:
    """``text`` parsed as ``kind``, or raise ValueError; lists are comma-separated."""
    if kind is bool:
        try:
            return _BOOLS[text.strip().lower()]
        except KeyError:
            raise ValueError(f"expected {_kind_name(kind)}") from None
    if kind is int or kind is float:
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"expected {_kind_name(kind)}") from None
    if kind == tuple[str, ...]:
        return tuple(part.strip() for part in text.split(",") if part.strip())
    return text


def _kind_name(kind: type) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        kind, "a list of strings")


def _check(field: dataclasses.Field, key: str, value: object, where: str,
           raw: object = None) -> object:
    """``value`` if it satisfies the field's range, choices and pattern; else ConfigError.

    ``raw`` is what the user wrote, shown in the message if given (an environment string).
    """
    meta = field.metadata
    if raw is None:
        raw = value
    if meta["fold_case"] and isinstance(value, str):
        value = next((c for c in meta["choices"] if c.lower() == value.lower()), value)
    checked = _check_value(meta, value)
    if checked:
        raise _error(key, raw, where, checked)
    return value


def _check_value(meta: Mapping[str, typing.Any], value: typing.Any) -> str | None:
    """The problem with ``value`` under the field's rules, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if meta["min"] is not None and value < meta["min"]:
        return "must not be negative" if meta["min"] == 0 else f"must be >= {meta['min']}"
    if meta["max"] is not None and value > meta["max"]:
        return f"must be <= {meta['max']}"
    if meta["choices"] and value not in meta["choices"]:
        return ("must be one of " + ", ".join(meta["choices"])
                + _did_you_mean(str(value), list(meta["choices"])))
    if meta["pattern"] and not re.fullmatch(meta["pattern"], str(value)):
        return f"must match {meta['pattern']}"
    return None


def _kafka_value(key: str, value: object, where: str) -> object:
    if key in _KAFKA_DERIVED:
        raise _error(f"kafka.{key}", value, where, f"set {_KAFKA_DERIVED[key]} instead")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)  # librdkafka lists are comma-separated strings
    if not isinstance(value, str | int | float | bool):
        raise _error(f"kafka.{key}", value, where, "must be a string, number or boolean")
    return value


def _flatten(table: Mapping[str, object], prefix: str = "") -> Iterator[tuple[str, object]]:
    """Dotted librdkafka keys written unquoted in TOML are nested tables: undo that."""
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _read_toml(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"config file {path}: cannot be read: {e.strerror or e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path}: not valid TOML: {e}") from e


def _apply_file(path: str, values: dict[str, dict[str, object]],
                kafka: dict[str, object], kafka_where: dict[str, str],
                deprecated: list[tuple[str, str, str]]) -> None:
    for section, body in _read_toml(path).items():
        if section != KAFKA and section not in SECTIONS:
            raise ConfigError(f"unknown section [{section}] in {path}"
                              + _did_you_mean(section, [*SECTIONS, KAFKA]))
        if not isinstance(body, dict):
            raise _error(section, body, path, "must be a table ([section] header)")
        if section == KAFKA:
            for k, v in _flatten(body):
                kafka[k], kafka_where[k] = _kafka_value(k, v, path), path
            continue
        for old_key, value in body.items():
            if (section, old_key) in RETIRED:
                raise _error(f"{section}.{old_key}", value, path, RETIRED[section, old_key])
            where, key = section, old_key
            if (section, old_key) in RENAMED:
                where, key = RENAMED[section, old_key]
                deprecated.append((f"{section}.{old_key}", f"{where}.{key}", path))
            fields = _fields(where)
            name = f"{where}.{key}"
            if key not in fields:
                raise _error(name, value, path, "unknown key" + _did_you_mean(key, [*fields]))
            field, kind = fields[key]
            try:
                typed = _from_toml(kind, value)
            except TypeError as e:
                raise _error(name, value, path, str(e)) from None
            values[where][key] = _check(field, name, typed, path, raw=value)


def _apply_env(env: Mapping[str, str], values: dict[str, dict[str, object]],
               kafka: dict[str, object], kafka_where: dict[str, str],
               deprecated: list[tuple[str, str, str]]) -> bool:
    """Apply every ``GARMEXPORT_*`` variable; True if any was a config key."""
    known = {env_name(s, k): (s, k) for s in SECTIONS for k in _fields(s)}
    renamed = {env_name(*old): new for old, new in RENAMED.items()}
    retired = {env_name(s, k): why for (s, k), why in RETIRED.items()}
    used = False
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == CONFIG_PATH_ENV:
            continue
        text, where = env[var], f"environment variable {var}"
        rest = var[len(ENV_PREFIX):]
        if rest.startswith("KAFKA_") and len(rest) > len("KAFKA_"):
            key = rest[len("KAFKA_"):].lower().replace("_", ".")
            kafka[key], kafka_where[key] = _kafka_value(key, text, where), where
        elif var in retired:
            raise ConfigError(f"{where}: {retired[var]}")
        elif var in known or var in renamed:
            section, key = known[var] if var in known else renamed[var]
            if var in renamed:
                deprecated.append((var, env_name(section, key), "environment"))
            field, kind = _fields(section)[key]
            try:
                typed = _from_env(kind, text)
            except ValueError as e:
                raise _error(f"{section}.{key}", text, where, str(e)) from None
            values[section][key] = _check(field, f"{section}.{key}", typed, where, raw=text)
        else:
            raise ConfigError(f"unknown configuration variable {var}"
                              + _did_you_mean(var, [*known, CONFIG_PATH_ENV]))
        used = True
    return used


def load_config(path: str | None, env: Mapping[str, str]) -> Config:
    """Build the config from embedded defaults, then ``path`` (TOML), then ``env``.

    ``env`` is passed in (usually ``os.environ``) so that tests never depend on the process
    environment. Raises :class:`garmexport.errors.ConfigError` naming the key, the bad value
    (masked if secret) and the file or environment variable, for any unreadable file, unknown
    section or key (with a did-you-mean), wrong type, value out of range or not allowed.
    """
    values: dict[str, dict[str, object]] = {section: {} for section in SECTIONS}
    kafka = dict(DEFAULT_KAFKA)
    kafka_where = {key: "defaults" for key in kafka}
    origin = ["defaults"]
    deprecated: list[tuple[str, str, str]] = []
    if path is not None:
        _apply_file(path, values, kafka, kafka_where, deprecated)
        origin.append(path)
    if _apply_env(env, values, kafka, kafka_where, deprecated):
        origin.append("environment")
    sections = {name: SECTIONS[name](**given) for name, given in values.items()}
    out = sections["output"]
    if out.hdfs_kerberos and out.hdfs_kerberos_keytab and not out.hdfs_kerberos_principal:
        raise ConfigError(f"output.hdfs_kerberos_keytab = {out.hdfs_kerberos_keytab!r} needs "
                          f"output.hdfs_kerberos_principal, the principal whose key it holds "
                          f"(from {' and '.join(origin[1:])})")
    config = Config(kafka=KafkaSettings(kafka), origin=tuple(origin),
                    deprecated=tuple(deprecated), **sections)
    check_kafka_settings(config.consumer_settings(), kafka_where,
                         lambda key: env_name(KAFKA, key))
    return config


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # a TOML basic string is a JSON string for these values


#: keys whose 0 stands for a number found at run time, and how to find it: ``describe``
#: shows the number beside the 0, which alone does not say how many readers will run
_RESOLVED_AT_RUN_TIME: dict[tuple[str, str], Callable[[Config], int]] = {
    ("actors", "parallelism"): lambda c: c.actors.readers(),
    ("actors", "cores"): lambda c: c.actors.worker_threads(),
}


def describe(config: Config) -> str:
    """The effective configuration as TOML with secrets masked (see Config.describe); a key
    whose 0 is resolved at run time carries, as a comment, what it resolves to here."""
    lines = ["# effective garmexport configuration, from " + " < ".join(config.origin)]
    for f in dataclasses.fields(config):
        if f.name in ("origin", "deprecated"):
            continue
        lines.append(f"\n[{f.name}]")
        if f.name == KAFKA:
            lines += [f"{json.dumps(k)} = {_toml(shown(k, v))}" for k, v in config.kafka.items()]
            continue
        section = getattr(config, f.name)
        for key in _fields(f.name):
            value = getattr(section, key)
            line = f"{key} = {_toml(shown(key, value))}"
            resolve = _RESOLVED_AT_RUN_TIME.get((f.name, key))
            if resolve is not None and value == 0:
                line += f"  # 0: the CPUs this process may use, {resolve(config)} here"
            lines.append(line)
    return "\n".join(lines) + "\n"
