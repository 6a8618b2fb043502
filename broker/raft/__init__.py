"""KIP-595 Raft: the pure core, its driver, the quorum-state store."""
