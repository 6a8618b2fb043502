"""Client quotas (Kafka documentation §4.9 "Quotas"): rate windows, entity precedence, throttle decisions, and
connection limits. Everything here is pure (time is passed in); the network layer and the
dispatcher do the muting and the sleeping."""
