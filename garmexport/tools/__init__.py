"""Operator and test tools: verify, offsets, broker scans, generator, local services."""
