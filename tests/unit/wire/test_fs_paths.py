"""FsEvent paths the JVM exporter's way: the rows match its values, only with the key on."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from garmexport.wire.columns import decode_batch
from garmexport.wire.events import HEADER, by_output
from garmexport.wire import fs_paths
from garmexport.wire.fs_paths import jvm_style, without_port
from garmexport.wire.frames import encode

FS = by_output("fs")
NOW_MS = 1_793_600_000_000
DAY_MS = 86_400_000

#: (uri, src_path, dst_path) as the agent sends them -> as the JVM exporter writes them
CASES = [
    (("hdfs://nn1.example.com:8020", "hdfs://nn1.example.com:8020/user/a/f",
      "hdfs://nn1.example.com:8020/user/a/g"),
     ("hdfs://nn1.example.com", "/user/a/f", "/user/a/g")),
    (("hdfs://nn1.example.com:8020", "/user/b", ""),  # already relative; "" is NULL
     ("hdfs://nn1.example.com", "/user/b", None)),
    (("hdfs://nn1.example.com:8020", "hdfs://nn1.example.com/user/c", ""),  # port-less prefix
     ("hdfs://nn1.example.com", "/user/c", None)),
    (("viewfs://root", "viewfs://root/logs/x", "hdfs://other:8020/logs/x"),  # no port; other fs
     ("viewfs://root", "/logs/x", "hdfs://other:8020/logs/x")),
    (("hdfs://nn1.example.com:8020", "hdfs://nn1.example.com:80200/z", ""),  # not the prefix
     ("hdfs://nn1.example.com", "hdfs://nn1.example.com:80200/z", None)),
    (("hdfs://nn3:8020/base", "hdfs://nn3:8020/base/x", ""),  # a uri with a path of its own
     ("hdfs://nn3/base", "hdfs://nn3:8020/base/x", None)),
    (("", "hdfs://nn2:9000/w", ""),  # no uri: nothing to strip
     (None, "hdfs://nn2:9000/w", None)),
]


def frames() -> list[bytes]:
    return [encode(FS.marker, NOW_MS + i, HEADER(hostname=f"h{i % 2}"),
                   FS.message(uri=uri, src_path=src, dst_path=dst, action="READ"))
            for i, ((uri, src, dst), _) in enumerate(CASES)]


@pytest.mark.parametrize("max_distinct", [fs_paths.MAX_DISTINCT_URIS, 0],
                         ids=["per distinct uri", "regular expressions"])
def test_decoded_fs_rows_get_the_jvm_exporters_values_and_nothing_else_changes(
        monkeypatch: pytest.MonkeyPatch, max_distinct: int) -> None:
    monkeypatch.setattr(fs_paths, "MAX_DISTINCT_URIS", max_distinct)
    table, failures = decode_batch(FS, frames(), 0, list(range(len(CASES))))
    assert failures == []
    out = jvm_style(table)
    got = list(zip(out.column("uri").to_pylist(), out.column("src_path").to_pylist(),
                   out.column("dst_path").to_pylist()))
    assert got == [want for _, want in CASES]
    assert out.schema == table.schema
    for name in set(table.column_names) - {"uri", "src_path", "dst_path"}:
        assert out.column(name).equals(table.column(name)), name
    assert jvm_style(table.slice(0, 0)).num_rows == 0


def test_only_a_port_after_the_host_is_dropped() -> None:
    assert without_port("hdfs://nn:8020") == "hdfs://nn"
    assert without_port("hdfs://user@nn:8020/base") == "hdfs://user@nn/base"
    assert without_port("file:///tmp/x") == "file:///tmp/x"
    assert without_port("hdfs://nn:port") == "hdfs://nn:port"


def test_the_writer_rewrites_fs_rows_only_with_the_key_on(tmp_path) -> None:
    from garmexport.pipeline.messages import Batch
    from garmexport.pipeline.origin_writer import OriginWriter
    from garmexport.protocol.resume import OriginState
    from garmexport.settings.load import load_config
    from garmexport.storage.local import LocalStorage

    values = frames()
    n = len(values)
    batch = Batch(1, n - 1, tuple(range(n)), tuple(values), (NOW_MS,) * n,
                  (NOW_MS // DAY_MS,) * n, (), sum(map(len, values)))
    published = {}
    for on in (False, True):
        root = tmp_path / str(on)
        config = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(root),
                                    "GARMEXPORT_WRITER_MAX_FILE_ROWS": str(n),
                                    "GARMEXPORT_JVM_FS_PATHS": str(on).lower()})
        writer = OriginWriter(config, LocalStorage(str(root), "t"), "fs", 0)
        writer.reset(1, OriginState(-1, {}), -1)
        assert writer.handle_batch(batch).published
        [path] = list(root.rglob("*.parquet"))
        published[on] = pq.read_table(path).column("src_path").to_pylist()
    assert published[True] == [want[1] for _, want in CASES]
    assert published[False] == [sent[1] for sent, _ in CASES]
