"""The exporter's commit steps, named once (DESIGN.md 4.3).

A file commit and a marker round take these steps, in this order; each name is the point
right *after* the step, where a crash leaves the store in a state the next start-up must
resolve (DESIGN.md 4.7 says how). The crash points of the real exporter
(:func:`garmexport.pipeline.crash_points.crash_point`) and the protocol model test use these names,
so a step the code takes and the model does not (or the reverse) shows up as a name that
only one side knows. Compaction's swap names its own steps (``compaction.swap.STEPS``).
"""

from __future__ import annotations

#: The intent naming the file's chain and first offset is written; the file is not final.
INTENT = "intent"
#: The data or quarantine file is final under its name; no marker knows it yet.
PUBLISH = "publish"
#: A marker is written; markers it dominates and intents it covers are not yet deleted.
MARKER = "marker"
#: One marker the new one dominates is deleted.
MARKER_GC = "marker-gc"
#: One intent the new marker covers is deleted.
INTENT_GC = "intent-gc"

#: Every step, in commit order.
STEPS = (INTENT, PUBLISH, MARKER, MARKER_GC, INTENT_GC)
