"""Client exceptions. Every operating error is a ``KafkaError`` carrying a Kafka error code
(``pyspark_log.wire.errors``), so callers branch on ``exc.code`` (or ``exc.retriable``) and the
name in the message is Kafka's. Configuration mistakes raise ``ConfigError`` (a ``ValueError``).

A client never lets a raw decode traceback escape: wire-level failures are wrapped here.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark_log.client.types import TopicPartition
from pyspark_log.wire.errors import ErrorCode, KafkaError

__all__ = [
    "BrokerConnectionError",
    "BufferExhaustedError",
    "ClientClosedError",
    "CommitFailedError",
    "ConfigError",
    "ErrorCode",
    "IllegalTransactionStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "OffsetOutOfRangeError",
    "ProducerFencedError",
    "ProtocolError",
    "RecordTooLargeError",
    "TopicAlreadyExistsError",
    "TransactionAbortableError",
    "UnknownTopicOrPartitionError",
    "UnsupportedFeatureError",
    "error_for",
]


class ConfigError(ValueError):
    """A config key that does not exist, or a value of the wrong type or range."""


class ClientError(KafkaError):
    """Base of the client's own KafkaError subclasses; pickles as ``KafkaError`` does (by code,
    message and attributes), so errors cross to and from Spark executors."""


class KafkaTimeoutError(ClientError):
    """An operation did not finish within its time bound (Kafka's ``TimeoutException``)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class BufferExhaustedError(KafkaTimeoutError):
    """``buffer.memory`` stayed full for ``max.block.ms``."""


class BrokerConnectionError(ClientError):
    """A broker could not be reached or the connection broke (NETWORK_EXCEPTION, retriable)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class ProtocolError(ClientError):
    """The broker's bytes did not match the protocol (bad frame, correlation id, or body)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message)


class ClientClosedError(ClientError):
    """The client (or its I/O loop) was closed while the operation waited."""

    def __init__(self, message: str = "the client is closed") -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)

    @property
    def retriable(self) -> bool:
        return False


class UnsupportedFeatureError(ClientError):
    """A feature the client or the broker does not offer (yet)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


class RecordTooLargeError(ClientError):
    """A record larger than ``max.request.size`` or ``buffer.memory`` (or than the broker allows)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.MESSAGE_TOO_LARGE, message)


class OffsetOutOfRangeError(ClientError):
    """The fetch position is outside the log and ``auto.offset.reset`` is ``none``.

    ``partitions`` maps each affected partition to the offset that was out of range.
    """

    def __init__(self, partitions: dict[TopicPartition, int], message: str | None = None) -> None:
        self.partitions = dict(partitions)
        text = message or "offsets out of range with no reset policy (auto.offset.reset=none): " + ", ".join(
            f"{tp}@{off}" for tp, off in sorted(self.partitions.items())
        )
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, text)


class CommitFailedError(ClientError):
    """A group member's offset commit that cannot succeed: its generation is over (the group
    rebalanced: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) or a rebalance is in progress
    (REBALANCE_IN_PROGRESS). ``code`` says which; poll again to rejoin, then commit."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(ErrorCode.of(code), message)


class UnknownTopicOrPartitionError(ClientError):
    """The broker does not host this topic-partition."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)


class TopicAlreadyExistsError(ClientError):
    """CreateTopics for a name that exists."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.TOPIC_ALREADY_EXISTS, message)


class ProducerFencedError(ClientError):
    """Another producer with the same ``transactional.id`` (or a newer epoch of this producer id)
    exists: this producer is a zombie. Fatal: the producer can only be closed (KIP-98)."""

    def __init__(self, message: str | None = None, code: int = ErrorCode.PRODUCER_FENCED) -> None:
        super().__init__(ErrorCode.of(code), message)

    @property
    def retriable(self) -> bool:
        return False


class IllegalTransactionStateError(ClientError):
    """A transactional call that is illegal in the producer's current state (Kafka's
    ``IllegalStateException``), e.g. ``commit_transaction`` before ``begin_transaction``."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_TXN_STATE, message)

    @property
    def retriable(self) -> bool:
        return False


class TransactionAbortableError(ClientError):
    """The current transaction hit an error it cannot recover from, but the producer can:
    call ``abort_transaction`` and start a new one. ``code`` is the underlying error's."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(ErrorCode.of(code), message)

    @property
    def retriable(self) -> bool:
        return False


_BY_CODE: dict[ErrorCode, Callable[[str | None], ClientError]] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicOrPartitionError,
    ErrorCode.TOPIC_ALREADY_EXISTS: TopicAlreadyExistsError,
    ErrorCode.PRODUCER_FENCED: ProducerFencedError,
}


def error_for(code: int, message: str | None = None, *, context: str | None = None) -> KafkaError:
    """The exception for a Kafka error code from a response (``context`` prefixes the message)."""
    err = ErrorCode.of(code)
    text = "; ".join(part for part in (context, message) if part) or None
    if err == ErrorCode.MESSAGE_TOO_LARGE:
        return RecordTooLargeError(text or "the broker rejected the batch as too large")
    if err == ErrorCode.REQUEST_TIMED_OUT:
        return KafkaTimeoutError(text or "the broker timed out the request")
    named = _BY_CODE.get(err)
    if named is not None:
        return named(text)
    return ClientError(err, text)
