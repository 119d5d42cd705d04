"""Reading one visible file for ``garmexport verify``: a file that cannot be read is a finding.

An output root can hold a file named like a data file that is not one: a truncated copy,
an upload cut short, a text file put there by hand. A reader of the table fails on it, so
verify names it (:class:`~garmexport.verify.findings.Unreadable`) and goes on: one
bad file must not hide the duplicates and gaps of the others. Only pyarrow's errors while
decoding the bytes are findings; an error of the store while fetching them says nothing
about the file, and still ends the check.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from garmexport.storage.base import Storage
from garmexport.verify.findings import Unreadable

#: what pyarrow raises on bytes it cannot decode (ArrowInvalid for a missing footer or
#: magic bytes; OSError, pyarrow's ArrowIOError, for a footer or page it cannot parse)
_DECODING = (pa.ArrowException, OSError)


def read_table(storage: Storage, path: str, unreadable: list[Unreadable],
               columns: list[str] | None = None) -> pa.Table | None:
    """The rows of the file at ``path`` (only ``columns``, if given) with its footer's
    key-value metadata; None after adding why it cannot be read to ``unreadable``."""
    source = pa.BufferReader(storage.read(path))
    try:
        parquet = pq.ParquetFile(source)
    except _DECODING as exc:
        unreadable.append(Unreadable(path, f"not a Parquet file: {_one_line(exc)}"))
        return None
    try:
        table = parquet.read(columns=columns)
    except _DECODING as exc:
        unreadable.append(Unreadable(path, "a Parquet file whose rows cannot be read: "
                                           + _one_line(exc)))
        return None
    # pyarrow leaves out a column the file lacks rather than raise
    missing = [c for c in columns or () if c not in table.column_names]
    if missing:
        unreadable.append(Unreadable(path, "a Parquet file without the column"
                                           f"{'s' if len(missing) > 1 else ''} "
                                           + ", ".join(missing)))
        return None
    return table


def _one_line(exc: BaseException) -> str:
    # the report gives each finding one line; some of pyarrow's reasons span several
    return " ".join(str(exc).split())
