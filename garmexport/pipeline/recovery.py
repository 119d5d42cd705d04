"""Reading a partition's committed state from the store (the I/O half of resume).

Cost: one listing of the partition's ``_offsets`` directory, one small read per marker
(a few: older ones are garbage-collected), and one existence check plus one footer read
per intent above W (the files published since the newest marker). It does not depend on
the number of days or files in the output.

A partition with no marker yet, on a root the Garmadon JVM exporter wrote, starts where
that exporter stopped: given a :class:`~garmexport.pipeline.jvm_recovery.JvmScan`, its
offsets join the state as one more marker (:mod:`garmexport.protocol.jvm_resume`). Once a
marker exists the JVM footers are not read again; the few newest JVM files that the
takeover recorded (``j+takeover.json``) are listed at each start, to refuse one while the
JVM exporter still writes (:func:`garmexport.protocol.jvm_resume.still_writing`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from garmexport.errors import ProtocolViolation
from garmexport.storage.footer import read_facts
from garmexport.protocol.naming import (
    TAKEOVER_FILE, FileName, IntentName, MarkerName, chain_path, partition_dir,
)
from garmexport.protocol.resume import Marker, PartitionState, intents_to_check, merge_state
from garmexport.protocol.jvm_resume import JvmFound, Takeover, still_writing, takeover_marker
from garmexport.storage.base import Storage

if TYPE_CHECKING:
    from garmexport.pipeline.jvm_recovery import JvmScan


@dataclass(frozen=True)
class Recovered:
    state: PartitionState
    markers: dict[MarkerName, Marker]
    intents: tuple[IntentName, ...]
    files_checked: int
    #: per origin, what the JVM exporter committed (only read when no marker exists)
    jvm: dict[str, JvmFound] = field(default_factory=dict)
    #: the JVM takeover record of the partition, if garmexport took it over from the JVM
    takeover: Takeover | None = None


def read_partition_state(
    storage: Storage, source: str, topic: str, partition: int, jvm: JvmScan | None = None,
) -> Recovered:
    """The committed state of one partition; raises StorageError when the store fails.

    With ``jvm`` and no marker, the JVM exporter's offsets of the partition are merged in
    (ProtocolViolation when one of its files cannot be read)."""
    pdir = partition_dir(source, topic, partition)
    markers: dict[MarkerName, Marker] = {}
    intents: list[IntentName] = []
    takeover: Takeover | None = None
    for entry in storage.list(pdir):
        if (m := MarkerName.parse(entry.name)) is not None:
            try:
                markers[m] = Marker.from_json(storage.read(f"{pdir}/{entry.name}"))
            except FileNotFoundError:
                continue  # garbage-collected by another owner since the listing
            except ValueError as exc:
                raise ProtocolViolation(f"{storage.uri}/{pdir}/{entry.name}: {exc}") from None
        elif (i := IntentName.parse(entry.name)) is not None:
            intents.append(i)
        elif entry.name == TAKEOVER_FILE:
            try:
                takeover = Takeover.from_json(storage.read(f"{pdir}/{entry.name}"))
            except ValueError as exc:
                raise ProtocolViolation(f"{storage.uri}/{pdir}/{entry.name}: {exc}") from None
    if jvm is not None and takeover is not None:
        changed = still_writing(takeover, jvm.recent(partition, takeover.since))
        if changed:
            raise ProtocolViolation(
                f"partition {partition}: the Garmadon JVM exporter wrote to {storage.uri} after "
                f"garmexport took the partition over ({', '.join(changed[:5])}"
                f"{', ...' if len(changed) > 5 else ''}); its records after the takeover "
                "point would be exported twice. Stop the JVM exporter, then see README, "
                "Taking over from the JVM exporter")
    found = jvm.found(partition) if jvm is not None and not markers else {}
    taken = takeover_marker(partition, found)
    merged = [*markers.values(), *([taken] if taken is not None else [])]
    published: list[tuple[IntentName, int]] = []
    checked = intents_to_check(merged, intents)
    for intent in checked:
        origin = intent.origin if intent.kind == "q" else None
        name = FileName(source, topic, partition, intent.first_offset, origin)
        path = chain_path(intent.origin, intent.kind, intent.day, name)
        try:
            facts = read_facts(storage, path)
        except FileNotFoundError:
            continue  # the publish never happened (crash, or a fenced loser)
        except ValueError as exc:
            raise ProtocolViolation(f"{storage.uri}/{path}: {exc}") from None
        published.append((intent, facts.last_offset))
    state = merge_state(partition, merged, published)
    return Recovered(state, markers, tuple(sorted(intents)), len(checked), found, takeover)
