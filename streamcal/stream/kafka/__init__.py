"""Kafka: the clients of the stream processor and what it builds on them.

Modules, one idea each:

* ``port`` -- what the processor asks of a Kafka client, in streamcal's own values
  (partitions, records, unreadable ranges) and errors.
* ``kafka_python`` -- the adapter of the port to kafka-python: the only module that
  imports it, and the home of every reach-in into its private parts.
* ``librdkafka`` -- the adapter of the port to confluent-kafka (``--kafka-client
  librdkafka``): the only module that imports it.
* ``adapters`` -- which adapter a client is built with.
* ``clients`` -- every Kafka client is built here (consumers, the outbox's producer
  settings, the admin client), so that their shared settings have one place.
* ``inputs`` -- ``Inputs``: what the processor reads (its consumer, its place in the
  group, the merge of the partitions assigned to it).
* ``group`` -- consumer-group membership: which units this instance runs
  (``GroupMembership``), and the lock that keeps ``--scope global`` single (``GlobalLock``).
* ``ordering`` -- ``OrderedMerge``: the deterministic k-way merge of all input partitions.
* ``fingerprints`` -- the marks of the last records read, checked against the log (lost
  input that no fetch shows).
* ``sink`` -- producing outputs: the outbox, and the producer process that runs it.

Nothing outside the two adapters imports a Kafka client (tests/test_layers.py); the client
itself is imported inside functions, when a processor runs, so that importing these
modules stays cheap.
"""
