"""Stream: the Kafka stream processor (consume, join labels, produce, dead letters, checkpoints)."""
