"""Tiered storage (KIP-405) building blocks: remote segment metadata and its state machine
(:mod:`.metadata`), ``__remote_log_metadata`` record values in Kafka's format (:mod:`.serde`),
the pure copy / local-deletion planners (:mod:`.plan`), the remote read and leader-epoch helpers
(:mod:`.read`), Kafka's metadata partitioner (:mod:`.partitioner`), the settings and topic checks
(:mod:`.config`), the pluggable RemoteStorageManager with the built-in filesystem tier
(:mod:`.storage`), and the broker's driver of them all, :mod:`.manager` (see docs/compatibility.md,
"Tiered storage (KIP-405)").
"""
