"""The native floor: the exporter's own decoder and Parquet settings, without the protocol.

``python tests/bench/native_floor.py --bootstrap H:P --topic T --group G --events N --out DIR``
is ``plain_pipeline.py``'s loop (one process, the same consumer settings, records gathered
per (type, partition) into batches of ``--batch``, tables kept per (type, day), one Parquet
file per group when it is large enough, over the budget, or at the end) with the two CPU
steps garmexport uses instead of plain Python:

- decoding with :func:`garmexport.wire.columns.decode_batch` (upb check, ptars, Arrow compute);
- writing with the exporter's Parquet settings (:func:`garmexport.pipeline.parquet_io.to_parquet_bytes`:
  zstd, 256k-row groups, dictionaries except on the all-distinct columns).

No actors, no routing rules beyond the frame head, no intents, markers, links or fsyncs, no
quarantine files: what one process needs for the same libraries to do the same work. The
exporter's CPU per event above this floor is what the protocol and the rest cost. Same
options and the same JSON line as ``plain_pipeline.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
from plain_pipeline import main as pipeline_main  # tests/bench, the script's directory

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from garmexport.wire.columns import decode_batch  # noqa: E402
from garmexport.pipeline.parquet_io import FileFacts, to_parquet_bytes  # noqa: E402

#: to_parquet_bytes attaches file facts; the floor has no protocol, so these are fixed
_FACTS = FileFacts("floor", "floor", 0, 0, 0, 0)


def write_like_exporter(table: pa.Table, path: Path) -> None:
    """One Parquet file encoded as the exporter encodes its files, written without fsync."""
    path.write_bytes(to_parquet_bytes([table], _FACTS, "zstd"))


def main(argv: list[str] | None = None) -> int:
    return pipeline_main(argv, decode_batch=decode_batch, write_file=write_like_exporter,
                         description=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
