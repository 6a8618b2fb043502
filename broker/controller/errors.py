"""Metadata operation failures, each carrying the Kafka error code the client receives."""

from __future__ import annotations


class MetadataError(Exception):
    """A metadata change that was refused; ``code`` is the Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# Kafka error codes used by metadata operations.
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
POLICY_VIOLATION = 44
TOPIC_DELETION_DISABLED = 73
INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100
