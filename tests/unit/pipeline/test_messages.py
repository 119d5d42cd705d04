"""Actor messages pickle: thespian requires it, and the in-process base would hide it."""

from __future__ import annotations

import dataclasses
import pickle

from garmexport.pipeline import messages
from garmexport.settings.load import load_config


def test_every_message_type_survives_pickling_with_its_fields():
    cfg = load_config(None, {})
    samples = {
        "config": cfg, "instance": "i-1", "exporter": None, "origin": "fs", "partition": 3,
        "epoch": 2, "low": 10, "last": (("d", "2026-11-01", 12),), "upto": 20,
        "offsets": (11, 12), "values": (b"a", None), "kafka_ts": (1, 2), "days": (3, 4),
        "bad": ((1, "null_value", "record value is null", None),), "count": 1,
        "reason": "x", "exit_code": 0, "where": "w", "traceback": "t",
    }
    checked = 0
    for cls in vars(messages).values():
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)) or cls is type(cfg):
            continue
        if cls.__module__ != messages.__name__:
            continue
        fields = {f.name: samples.get(f.name, 0) for f in dataclasses.fields(cls)}
        msg = cls(**fields)
        assert pickle.loads(pickle.dumps(msg)) == msg, cls.__name__
        checked += 1
    assert checked >= 12
