"""Garmadon bytes to Arrow rows: frames, the event-type table, columns; pure CPU, no I/O."""
