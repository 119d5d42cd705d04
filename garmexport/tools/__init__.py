"""Operator and test tools: verify, offsets inspection and bootstrap, broker scans, the event generator, the embedded broker."""
