"""Kafka's SCRAM mechanisms (RFC 5802 / 7677; KIP-554's ``ScramMechanism``): the hash function of
each and the type id DescribeUserScramCredentials / AlterUserScramCredentials carry. One table for
the broker's SASL server and credential records and the client's login and admin calls."""

from __future__ import annotations

SCRAM_DIGESTS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}  # hashlib names
SCRAM_MECHANISM_IDS: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_MECHANISM_NAMES: dict[int, str] = {v: k for k, v in SCRAM_MECHANISM_IDS.items()}
