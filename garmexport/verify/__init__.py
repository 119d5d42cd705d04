"""``garmexport verify``: every record exactly once, read back from the output root and counted per (partition, offset)."""
