"""What an operator sees of a process: log lines (``logs``), Prometheus metrics
(``metrics``, rendered cheaply by ``exposition``), lag in seconds (``lag_time``), and the
health endpoints (``health``); for an instance of several readers, the supervisor's view
of them (``reader_probe``, ``health_fold``, ``metrics_merge``); the rate limit of repeated
log lines (``repeat_limit``, for the Kafka and thrift clients' relays)."""
