"""The one place that publishes: intents, data files and markers.

Order of a file commit (DESIGN.md 4.3; fencing 4.8): write the intent (an empty file naming the
chain and first offset), stage the bytes, publish them exclusively under the final name.
The marker comes later, from the partition reader. A crash between any two steps leaves
either nothing visible, or a published file that the intent lets the next start-up find.
A publish whose name exists raises PublishConflict: another owner committed that stretch
of the chain first, and the caller must drop its writers for the partition and re-sync.
An empty file is never published.
"""

from __future__ import annotations

from garmexport.protocol.commit_steps import INTENT
from garmexport.pipeline.crash_points import crash_point
from garmexport.errors import PublishConflict
from garmexport.protocol.naming import (
    FileName, IntentName, MarkerName, chain_path, intent_path, partition_dir,
)
from garmexport.protocol.resume import Marker
from garmexport.storage.base import Storage


def publish_file(
    storage: Storage, name: FileName, intent: IntentName, data: bytes
) -> str:
    """Commit one data or quarantine file; return its path.

    Raises PublishConflict (the fence) or StorageError (retry later; nothing is visible
    that a retry would duplicate: a retry publishes the same name).
    """
    if not data:
        raise ValueError("refusing to publish an empty file")
    try:
        storage.put_exclusive(intent_path(name.source, name.topic, name.partition, intent), b"")
    except PublishConflict:
        pass  # an earlier attempt at the same stretch left it: it names the same file
    crash_point(INTENT)
    path = chain_path(intent.origin, intent.kind, intent.day, name)
    storage.put_exclusive(path, data)  # stage, publish, discard on failure: one place
    return path


def write_marker(
    storage: Storage, source: str, topic: str, name: MarkerName, marker: Marker
) -> str:
    """Publish a marker file; its name is unique to this instance, so it never conflicts."""
    path = f"{partition_dir(source, topic, marker.partition)}/{name.format()}"
    storage.put_exclusive(path, marker.to_json())
    return path
