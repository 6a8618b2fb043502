"""SASL authentication (KIP-43, KIP-152): JAAS-style configuration, mechanisms, per-connection state."""
