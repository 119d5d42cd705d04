"""Garmadon bytes to Arrow rows: frames, event types, schemas; pure CPU, no I/O."""
