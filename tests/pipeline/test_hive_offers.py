"""The reader tells the Hive registrar of every (dataset, day) it publishes a file to.

The registrar is handed to the reader when it is built (``Coordinator(..., registrar=...)``, as
``exporter_parts`` wires it); each published file is offered as (origin, kind, day), and
the registrar alone decides what is new (``hive.register.wanted``).
"""

from __future__ import annotations

from collections.abc import Iterable

from garmexport.settings.load import load_config
from garmexport.protocol.naming import QUARANTINE_DIR, FileName, parse_day_dir
from garmexport.storage.local import LocalStorage
from tests.pipeline.harness import Owner, every_type_by_partition


class OfferLog:
    """What the reader calls of a Registrar: ``offer``; keeps every offer."""

    def __init__(self) -> None:
        self.offers: set[tuple[str, str, str]] = set()

    def offer(self, origin: str, published: Iterable[tuple[str, str]]) -> None:
        self.offers.update((origin, kind, day) for kind, day in published)


def test_every_day_a_file_is_published_to_is_offered_to_the_registrar(tmp_path) -> None:
    out = tmp_path / "out"
    cfg = load_config(None, {"GARMEXPORT_OUTPUT_ROOT": str(out)})
    registrar = OfferLog()
    owner = Owner(cfg, LocalStorage(str(out), "x"), registrar=registrar)
    owner.coordinator.assign([0, 1])
    for p, records in every_type_by_partition(2, 3000).items():
        owner.feed(p, records)
    owner.finish()

    published = set()
    for f in out.rglob("*.parquet"):
        top, day_dir = f.relative_to(out).parts[:2]
        name, day = FileName.parse(f.name), parse_day_dir(day_dir)
        assert name is not None and day is not None, f
        if top == QUARANTINE_DIR:
            assert name.origin is not None
            published.add((name.origin, "q", day))
        else:
            published.add((top, "d", day))
    assert len({d for _, k, d in published if k == "d"}) >= 3, published
    assert registrar.offers == published
