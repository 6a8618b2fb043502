"""Errors raised by the record codecs.

Each maps to a Kafka error code where the broker reports it to a client
(CORRUPT_MESSAGE = 2, MESSAGE_TOO_LARGE = 10, INVALID_RECORD = 87, UNSUPPORTED_COMPRESSION_TYPE = 76).
"""


class RecordError(Exception):
    """Base class for every record-format error."""


class CorruptRecordError(RecordError):
    """Bytes that are not a valid RecordBatch v2: bad length, magic, CRC, or truncated input."""


class RecordTooLargeError(RecordError):
    """A batch (or its decompressed records) exceeds the configured size limit."""


class UnsupportedCompressionError(RecordError):
    """The attributes name a compression codec we do not implement."""
