"""``garmexport repair``: fill gaps from Kafka, take duplicates out, replay the quarantine."""
