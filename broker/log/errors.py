"""Errors of the log layer, each carrying the Kafka error code a client sees.

Operating errors (bad input, offsets out of range, a failing disk) raise a ``LogError`` subclass
whose ``code`` the request handlers put in the response unchanged (docs/architecture.md ("Kafka error codes
for bad input, assertions for invariants")). Broken
invariants inside the log are assertions, not ``LogError``.
"""

from __future__ import annotations


class LogError(Exception):
    """Base of every error the log reports to a client; ``code`` is Kafka's error code."""

    code: int = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogError):
    """A read or DeleteRecords below the log start offset or above the log end offset."""

    code = 1  # OFFSET_OUT_OF_RANGE


class CorruptMessageError(LogError):
    """Bytes that are not whole, valid v2 batches: length, magic, CRC, codec id, trailing bytes."""

    code = 2  # CORRUPT_MESSAGE


class MessageTooLargeError(LogError):
    """A batch larger than ``max.message.bytes`` (broker: ``message.max.bytes``)."""

    code = 10  # MESSAGE_TOO_LARGE


class RecordListTooLargeError(LogError):
    """One append larger than ``segment.bytes``: it could never fit in a segment."""

    code = 18  # RECORD_LIST_TOO_LARGE


class InvalidTimestampError(LogError):
    """A CreateTime timestamp outside ``message.timestamp.before/after.max.ms``, or a client batch
    that claims LogAppendTime."""

    code = 32  # INVALID_TIMESTAMP


class KafkaStorageError(LogError):
    """The log directory cannot be used (I/O error, locked by another broker, unreadable files)."""

    code = 56  # KAFKA_STORAGE_ERROR


class InvalidRecordError(LogError):
    """A well-formed batch that breaks a rule of Kafka's LogValidator (record count, control batch
    from a client, producer id without sequence, non-increasing offsets, a record without a key on
    a compacted topic). ``record_errors`` names the offending records, ``(index in the batch,
    message)``, for ProduceResponse v8+ ``record_errors`` (KIP-467)."""

    code = 87  # INVALID_RECORD

    def __init__(self, message: str = "", *, record_errors: tuple[tuple[int, str | None], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class LogDirLockedError(KafkaStorageError):
    """Another broker (process or manager) holds the ``.lock`` of this log directory."""
