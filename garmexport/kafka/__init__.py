"""The Kafka client's own signals: librdkafka's log lines relayed as ours (``signals``),
whether the broker is reachable (``broker_link``), the rate limit of repeated lines
(``repeat_limit``), and when to say that no assignment came (``assignment_wait``). Every Kafka client of every layer sends its lines through here."""
