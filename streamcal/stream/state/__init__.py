"""State: where the units of calibration are kept between runs, and how they come back.

Modules, one idea each:

* ``errors`` -- ``CheckpointError``, raised by every part of this package.
* ``kv`` -- ``KVStore``: an embedded RocksDB store written in atomic commits.
* ``fifo`` -- ``Fifo``: a first-in first-out sequence in a store, holes allowed.
* ``checkpoint`` -- the framing of a checkpoint (``seal`` / ``unseal``: magic, HMAC tag,
  plain-data payload) and ``CheckpointStore``, the checkpoint files of development
  versions before the store (read only to be refused, naming them).
* ``fingerprint`` -- the settings a unit's state is bound to, and ``check_fingerprint``.
* ``migrations`` -- the state format, its version, and the upgrades from older ones
  (none yet).
* ``topic`` -- ``StateTopic``: units' checkpoints as records of a Kafka topic.
* ``units`` -- ``UnitStates``: the one owner of restoring units (the local store, the
  state topic, which one wins) and of their parts of a checkpoint, which
  ``streamcal.stream.checkpointing`` commits in order.

Nothing is imported here, so that importing one module does not import the others.
"""
