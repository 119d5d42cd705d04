"""The operating-system process: its stop signals (``stop_signal``), the CPUs it may use
(``usable_cpus``), and whether it was itself paused (``pause_watch``)."""
