"""The thespian shells around the pipeline, each handler a delegation, and the exporter's composition root."""
