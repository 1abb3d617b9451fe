"""State: where the units of calibration are kept between runs, and how they come back.

Modules, one idea each:

* ``errors`` -- ``CheckpointError``, raised by every part of this package.
* ``checkpoint`` -- the framing of a checkpoint (``seal`` / ``unseal``: magic, HMAC tag,
  plain-data payload) and ``CheckpointStore``, atomic checkpoint files in a directory.
* ``migrations`` -- the state format, its version, and the upgrades from older ones.
* ``topic`` -- ``StateTopic``: units' checkpoints as records of a Kafka topic.
* ``units`` -- ``UnitStates``: the one owner of restoring and saving units (local
  directory, state topic, which one wins).

Nothing is imported here, so that importing one module does not import the others.
"""
