"""The operating-system process: its stop signals (``stop_signal``), the CPUs it may use
(``usable_cpus``), its instance id (``instance_id``), dying with its parent
(``parent_death``), and whether it was itself paused (``pause_watch``)."""
