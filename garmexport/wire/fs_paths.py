"""``FsEvent`` paths the way the Garmadon JVM exporter writes them (``[jvm] fs_paths``).

The agent sends ``uri`` (the file system, ``hdfs://nn1.example.com:8020``) and paths that
may carry it (``src_path = hdfs://nn1.example.com:8020/user/a``). The JVM exporter writes
``uri`` without its port and the paths without the ``uri`` prefix (``/user/a``), so its
tables are queried with host-only URIs and absolute paths. With the key on, garmexport
writes the same values; off (the default), the values as sent, so that the data of
existing garmexport users does not change under them.

Rules, per row: ``uri`` of the form ``scheme://host:port[/...]`` loses ``:port``; any other
``uri`` (and NULL) stays. A path whose ``scheme://authority`` is the row's ``uri`` as sent,
or without its port (a trailing ``/`` of the ``uri`` ignored), followed by ``/``, loses
that prefix; any other path stays (a path of
another file system, a relative one, NULL); a ``uri`` with a path of its own
(``hdfs://nn/base``) strips nothing. The JVM exporter's optional host-to-name
mapping is its own configuration and is not reproduced.

Cost: a batch's URIs are few (one per file system its jobs use), so the rules run once per
distinct ``uri`` as prefix tests and slices over the path columns, no Python per row; a
batch with many distinct URIs runs them as regular expressions over whole columns instead
(slower per row, independent of their number). Both give the same rows (tested).
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

PATH_COLUMNS = ("src_path", "dst_path")
#: ``scheme://[user@]host:port[/rest]``: group 1 without the port, group 2 the rest
_WITH_PORT = r"^([A-Za-z][A-Za-z0-9+.-]*://[^/:@]+(?:@[^/:@]+)?):[0-9]+(/.*)?$"
#: the ``scheme://authority`` a path starts with
_AUTHORITY = r"^[A-Za-z][A-Za-z0-9+.-]*://[^/]*"


def without_port(uri: str) -> str:
    """``scheme://host:port/x`` -> ``scheme://host/x``; anything else as it is."""
    return re.sub(_WITH_PORT, lambda m: m[1] + (m[2] or ""), uri, count=1)


#: above this many distinct ``uri`` in a batch, the rules run as regular expressions over
#: the whole columns (about 0.6 us a row) instead of once per distinct ``uri``
MAX_DISTINCT_URIS = 8


def jvm_style(table: pa.Table) -> pa.Table:
    """``table`` (rows of the ``fs`` dataset) with ``uri``, ``src_path`` and ``dst_path``
    rewritten by the module's rules; every other column untouched."""
    if table.num_rows == 0:
        return table
    uri = table.column("uri").combine_chunks()
    encoded = pc.dictionary_encode(uri)
    if len(encoded.dictionary) > MAX_DISTINCT_URIS:
        new_uri, paths = _by_regex(table, uri)
    else:
        new_uri, paths = _by_distinct_uri(table, encoded)
    out = table
    for name, column in [("uri", new_uri), *paths.items()]:
        at = out.schema.get_field_index(name)
        out = out.set_column(at, out.schema.field(name), column)
    return out


def _by_distinct_uri(table: pa.Table,
                     encoded: pa.DictionaryArray) -> tuple[pa.Array, dict[str, pa.Array]]:
    """The rules once per distinct ``uri``: prefix tests and slices, no regular expression
    over the rows (the usual case: one ``uri`` per file system)."""
    distinct = encoded.dictionary.to_pylist()
    # (row's uri index, prefix) pairs; a uri with a path of its own strips nothing
    prefixes = [(i, p) for i, sent in enumerate(distinct)
                for p in sorted({sent.rstrip("/"), without_port(sent).rstrip("/")})
                if re.fullmatch(_AUTHORITY, p) is not None]
    paths = {}
    for name in PATH_COLUMNS:
        column = table.column(name).combine_chunks()
        # one slice per prefix length (a slice costs ~20x a prefix test): group the hits
        by_length: dict[int, pa.Array] = {}
        for i, prefix in prefixes:
            hit = pc.and_(pc.equal(encoded.indices, pa.scalar(i, encoded.indices.type)),
                          pc.starts_with(column, prefix + "/"))
            seen = by_length.get(len(prefix))
            by_length[len(prefix)] = hit if seen is None else pc.or_(seen, hit)
        stripped = column
        for length, hit in sorted(by_length.items()):
            if pc.any(hit).as_py():  # usually one length of the two (with or without port)
                stripped = pc.if_else(pc.fill_null(hit, False),
                                      pc.utf8_slice_codeunits(column, length), stripped)
        paths[name] = stripped
    new_uri = pa.DictionaryArray.from_arrays(
        encoded.indices, pa.array([without_port(u) for u in distinct], pa.string()),
    ).dictionary_decode()
    return new_uri, paths


def _by_regex(table: pa.Table, uri: pa.Array) -> tuple[pa.Array, dict[str, pa.Array]]:
    """The same rules as regular expressions over whole columns, whatever the number of
    distinct ``uri``."""
    new_uri = pc.replace_substring_regex(uri, _WITH_PORT, r"\1\2")
    sent, short = pc.utf8_rtrim(uri, characters="/"), pc.utf8_rtrim(new_uri, characters="/")
    paths = {}
    for name in PATH_COLUMNS:
        path = table.column(name).combine_chunks()
        rest = pc.replace_substring_regex(path, _AUTHORITY, "")
        # the authority removed is the row's uri: uri + rest gives the path back
        ours = pc.and_(pc.starts_with(rest, "/"), pc.or_(
            pc.equal(pc.binary_join_element_wise(sent, rest, ""), path),
            pc.equal(pc.binary_join_element_wise(short, rest, ""), path)))
        paths[name] = pc.if_else(pc.fill_null(ours, False), rest, path)
    return new_uri, paths
