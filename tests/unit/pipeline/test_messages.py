"""Actor messages pickle: thespian requires it, and the in-process base would hide it."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np

from garmexport.pipeline import messages
from garmexport.protocol.naming import IntentName
from garmexport.settings.load import load_config


def test_every_message_type_survives_pickling_with_its_fields():
    cfg = load_config(None, {})
    samples = {
        "config": cfg, "instance": "i-1", "exporter": None, "origin": "fs", "partition": 3,
        "epoch": 2, "low": 10, "last": (("d", "2026-11-01", 12),), "upto": 20,
        "offsets": (11, 12), "values": (b"a", None), "kafka_ts": (1, 2), "days": (3, 4),
        "bad": ((1, "null_value", "record value is null", None),), "count": 1,
        "reason": "x", "exit_code": 0, "where": "w", "traceback": "t",
        "intent": IntentName("fs", "d", "2026-11-01", 11),
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


def test_a_batch_keeps_its_int64_columns_through_pickling():
    columns = {"offsets": np.array([11, 12], np.int64), "kafka_ts": np.array([1, 2], np.int64),
               "days": np.array([20000, 20001], np.int64)}
    batch = messages.Batch(1, 12, values=(b"a", None), bad=(), nbytes=1, **columns)
    back = pickle.loads(pickle.dumps(batch))
    assert back == batch
    for name, column in columns.items():
        assert getattr(back, name).dtype == np.int64
        assert getattr(back, name).tolist() == column.tolist()
    assert back != messages.Batch(1, 12, values=(b"a", None), bad=(), nbytes=1,
                                  **{**columns, "days": np.array([20000, 20002], np.int64)})
