"""pylog broker: a Kafka-compatible log broker."""
