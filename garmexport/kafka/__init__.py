"""The Kafka client code: the consumer the readers poll (``source``), librdkafka's log
lines relayed as ours and the state its callbacks feed (``client_callbacks``), whether the
broker is reachable (``broker_link``), when to say that no assignment came
(``assignment_wait``), reading partitions to their end (``partition_end``,
``record_probe``). Every Kafka client of every layer sends its lines through here."""
