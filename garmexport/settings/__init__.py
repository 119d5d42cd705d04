"""Configuration: the one frozen, typed ``Config`` (``config``), reading and checking it from
a TOML file and the environment (``load``), the check of ``[kafka]`` against the Kafka client
(``kafka_keys``), and which optional dependency each feature needs (``extras``)."""
