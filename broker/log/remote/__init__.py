"""Tiered storage (KIP-405) building blocks: remote segment metadata and its state machine
(:mod:`.metadata`), ``__remote_log_metadata`` record values in Kafka's format (:mod:`.serde`),
the pure copy / local-deletion planners (:mod:`.plan`), and the pluggable RemoteStorageManager
with the built-in filesystem tier (:mod:`.storage`). The broker does not yet drive them (see
docs/compatibility.md, "Tiered storage (KIP-405)").
"""
