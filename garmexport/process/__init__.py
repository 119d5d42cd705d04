"""The operating-system process: its stop signals (``stop_signal``) and the CPUs it may use
(``usable_cpus``)."""
