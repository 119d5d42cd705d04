"""What an operator sees of a process: log lines (``logs``), Prometheus metrics
(``metrics``), lag in seconds (``lag_time``), and the health endpoints (``health``)."""
