"""Where the writer of an origin puts each record of a routed batch: its dataset, or the
quarantine, and on which day. The one statement of that rule for the tools that must
name a place without writing (``verify``'s gaps, ``repair``'s plan), made of the same
pieces the writer (:mod:`garmexport.pipeline.origin_writer`) decides with:

- the router's verdict on the frame head and the event time (``OriginBatch.bad``, with
  the day each record goes on, :func:`garmexport.pipeline.router.route`);
- the decoder's verdict on the header and the body
  (:func:`garmexport.wire.columns.find_failures`, the check ``decode_batch`` makes);
- a bad record (either verdict) goes to ``_quarantine`` on the UTC day of its Kafka
  timestamp (:func:`garmexport.protocol.naming.quarantine_day`), any other to its
  origin's dataset on the router's day (its event day).

A record with a good head and a bad body is therefore in the quarantine, on its Kafka day,
not in its type's dataset on its event day.
"""

from __future__ import annotations

from collections.abc import Sequence

from garmexport.pipeline.router import OriginBatch
from garmexport.protocol.naming import FRAME_ORIGIN, QUARANTINE_DIR, quarantine_day
from garmexport.wire.columns import find_failures
from garmexport.wire.events import by_output


def quarantined(origin: str, batch: OriginBatch, check: Sequence[int] | None = None) -> set[int]:
    """Indexes into ``batch`` (of ``origin``) of the records its writer quarantines: the
    router's bad ones, and those of ``check`` (every record by default) whose header or
    body the decoder rejects. A record left out of ``check`` is judged by the router
    alone."""
    bad = {i for i, *_ in batch.bad}
    if origin == FRAME_ORIGIN:
        return bad  # every record of _frame is bad by its head
    todo = range(len(batch.offsets)) if check is None else check
    frames = [i for i in todo if i not in bad]
    if frames:
        failed = find_failures(by_output(origin), [batch.values[i] for i in frames])
        bad.update(frames[j] for j, _ in failed)
    return bad


def places(origin: str, batch: OriginBatch,
           check: Sequence[int] | None = None) -> list[tuple[str, int]]:
    """(place, day number) of every record of ``batch``, in its order: ``_quarantine`` on
    the Kafka day for a record :func:`quarantined` finds (``check`` as there), else
    ``origin`` on the router's day."""
    bad = quarantined(origin, batch, check)
    return [(QUARANTINE_DIR, quarantine_day(kafka_ms)) if i in bad else (origin, day)
            for i, (day, kafka_ms) in enumerate(zip(batch.days.tolist(),
                                                    batch.kafka_ts.tolist()))]
