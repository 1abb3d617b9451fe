"""Stream: the Kafka stream processor (consume, join labels, produce, dead letters, checkpoints).

``Processor(ProcessorConfig.from_sources(...)).run()`` is what ``streamcal run`` runs.
Modules, one idea each:

* ``config`` -- ``ProcessorConfig``: every setting, from flags, ``STREAMCAL_*`` and TOML.
* ``messages`` -- decoding and validating events and labels (or a dead-letter reason).
* ``ordering`` -- the deterministic k-way merge of all input partitions.
* ``pending`` -- bounded waiting rooms: events for labels, early labels for events.
* ``processor`` -- the loop: predict, produce, join, learn, metric lines, checkpoints.
* ``checkpoint`` -- atomic, HMAC-authenticated checkpoints.
* ``sink`` -- producing outputs: the outbox and the producer process that runs it.
* ``deadletter`` -- dead-letter records (original bytes, source, reason).
* ``models`` -- scoring-model presets and ``module:function``.

Only what a production deployment runs; the demo (local broker, demo stream) is
``streamcal.demo``.

Kafka is imported only when a processor runs, so importing this package is cheap.
"""
