"""Kafka: the clients of the stream processor and what it builds on them.

Modules, one idea each:

* ``clients`` -- every Kafka client is built here (consumers, the outbox's producer
  settings, the admin client), so that their shared settings have one place.
* ``inputs`` -- ``Inputs``: what the processor reads (its consumer, its place in the
  group, the merge of the partitions assigned to it).
* ``group`` -- consumer-group membership: which units this instance runs
  (``GroupMembership``), and the lock that keeps ``--scope global`` single (``GlobalLock``).
* ``ordering`` -- ``OrderedMerge``: the deterministic k-way merge of all input partitions.
* ``sink`` -- producing outputs: the outbox, and the producer process that runs it.

kafka-python itself is imported inside functions, when a processor runs, so that
importing these modules stays cheap.
"""
