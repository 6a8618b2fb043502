"""Tiered storage (KIP-405) building blocks: remote segment metadata and its state machine
(:mod:`.metadata`) and the pluggable RemoteStorageManager with the built-in filesystem tier
(:mod:`.storage`). The broker does not yet drive them (see docs/compatibility.md, "Tiered
storage (KIP-405)").
"""
