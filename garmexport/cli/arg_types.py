"""Argument types shared by the subcommands: each parses one option's text or refuses it.

argparse calls them; an ``ArgumentTypeError`` becomes the usual one-line usage error
(``garmexport verify: error: argument --timeout-s: must be more than 0, got -1.0``, exit 2),
so a negative duration or time is refused before anything runs instead of being taken as
"no wait" or "the epoch".
"""

from __future__ import annotations

import argparse
import datetime
import math

from garmexport.protocol.naming import check_label, parse_day


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {value}")
    return value


def day_arg(text: str) -> str:
    """A UTC day as the output names it, ``YYYY-MM-DD``."""
    if parse_day(text) is None:
        raise argparse.ArgumentTypeError(f"expected a day YYYY-MM-DD, got {text!r}")
    return text


def epoch_ms(text: str) -> int:
    """Epoch milliseconds (0 or more), or an ISO 8601 time (UTC when it names no zone)."""
    if text.lstrip("-").isdigit():
        value = int(text)
        if value < 0:
            raise argparse.ArgumentTypeError(
                f"a time must be epoch ms of 0 or more or ISO 8601, got {value}")
        return value
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not ISO 8601 nor epoch ms: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def instance_id(text: str) -> str:
    """An instance id: it names temp directories and markers, so only a label will do."""
    try:
        return check_label(text, "instance id")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
