"""Client quotas (seed 000 §4.9): rate windows, entity precedence, throttle decisions, and
connection limits. Everything here is pure (time is passed in); the network layer and the
dispatcher do the muting and the sleeping."""
