"""Stream: the Kafka stream processor (consume, join labels, produce, dead letters, checkpoints).

``Processor(ProcessorConfig.from_sources(...)).run()`` is what ``streamcal run`` runs.
Modules and sub-packages, one idea each:

* ``config`` -- ``ProcessorConfig``: every setting, from flags, ``STREAMCAL_*`` and TOML.
* ``processor`` -- ``Processor``: the loop (records to their units, outputs out, metric
  lines and checkpoints on time).
* ``unit`` -- ``CalibrationUnit``: one classifier and its joins (predict, wait, learn),
  one flow for every task.
* ``tasks`` -- the task registry: what each task supplies to that flow, one entry a
  task (binary, multiclass).
* ``pending`` -- what waits, on disk: events for labels, early labels for events, the
  finished ids; bounded in bytes.
* ``packing`` -- compact, exact bytes for the features that wait.
* ``messages`` -- decoding and validating events and labels (or a dead-letter reason).
* ``deadletter`` -- dead-letter records (original bytes, source, reason).
* ``models`` -- scoring-model presets and ``module:function``.
* ``metrics`` -- metric lines: made from a unit's snapshot, sent to file, topic, exporter.
* ``state`` -- where units are kept between runs: the embedded store (RocksDB) and its
  FIFO sequences, the checkpoint framing, the state format and its migrations, the
  state topic, restore/save of units.
* ``kafka`` -- the Kafka side: building clients, the processor's inputs, group
  membership, the ordered merge of all input partitions, the producer process.

Only what a production deployment runs; the demo (local broker, demo stream) is
``streamcal.demo``.

Kafka is imported only when a processor runs, so importing this package is cheap.
"""
