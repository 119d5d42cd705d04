"""The checked-in generated protobuf code is what protoc makes of proto/ today."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROTO, GENERATED = ROOT / "proto", ROOT / "garmexport" / "wire" / "_pb"


def test_generated_code_is_not_stale(tmp_path):
    protos = sorted(p.name for p in PROTO.glob("*.proto"))
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}", f"--python_out={tmp_path}"]
        + protos,
        check=True,
        cwd=ROOT,
    )
    fresh = {p.name: p.read_bytes() for p in tmp_path.glob("*_pb2.py")}
    checked_in = {p.name: p.read_bytes() for p in GENERATED.glob("*_pb2.py")}
    assert sorted(fresh) == sorted(p.replace(".proto", "_pb2.py") for p in protos)
    assert sorted(checked_in) == sorted(fresh), "generated files missing or left over"
    stale = [name for name in fresh if fresh[name] != checked_in[name]]
    assert not stale, f"{stale} are stale: run `tox -e proto` to regenerate garmexport/wire/_pb"
