"""Metadata operation failures, each carrying the Kafka error code the client receives
(``pyspark_log.wire.errors.ErrorCode``, the one enum of error codes)."""

from __future__ import annotations


class MetadataError(Exception):
    """A metadata change that was refused; ``code`` is the Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
