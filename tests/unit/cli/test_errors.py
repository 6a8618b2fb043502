"""One line per failure: Kafka error codes phrased for the user."""

from __future__ import annotations

from pyspark_log.cli.errors import connection_reason, kafka_error, unreachable
from pyspark_log.client.errors import (
    BrokerConnectionError,
    ErrorCode,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for,
)


def test_known_topic_errors_name_the_topic_and_the_code() -> None:
    exists = TopicAlreadyExistsError("create topic t; topic 't' already exists")
    assert str(kafka_error(exists, "t")) == "topic 't' already exists (TOPIC_ALREADY_EXISTS)"
    missing = UnknownTopicOrPartitionError("describe topic t")
    assert str(kafka_error(missing, "t")) == "topic 't' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"


def test_other_errors_keep_the_brokers_words_without_the_clients_context() -> None:
    exc = error_for(ErrorCode.INVALID_CONFIG, "unknown topic config 'x'", context="create topic t")
    assert str(kafka_error(exc, "t")) == "topic 't': unknown topic config 'x' (INVALID_CONFIG)"
    partitions = error_for(ErrorCode.INVALID_PARTITIONS, "topic 't' has 3 partitions; the new count must be larger")
    assert (
        str(kafka_error(partitions, "t"))
        == "topic 't' has 3 partitions; the new count must be larger (INVALID_PARTITIONS)"
    )
    assert str(kafka_error(KafkaError(ErrorCode.POLICY_VIOLATION))) == "policy violation (POLICY_VIOLATION)"


def test_connection_reasons() -> None:
    refused = BrokerConnectionError(
        "no broker reachable (bootstrap.servers=h:1): NETWORK_EXCEPTION (13): cannot connect to h:1: "
        "[Errno 111] Connect call failed ('127.0.0.1', 1)"
    )
    assert str(unreachable("h:1", refused)) == "cannot reach h:1: connection refused"
    assert connection_reason(BrokerConnectionError("connect to h:1 timed out after 10000 ms")) == "connection timed out"
    unknown = BrokerConnectionError("cannot connect to x:1: [Errno -2] Name or service not known")
    assert connection_reason(unknown) == "unknown host"
    assert connection_reason(BrokerConnectionError("something odd")) == "something odd"
    lost = kafka_error(BrokerConnectionError("broker 1 closed by the broker"))
    assert str(lost) == "lost the connection to the broker: the connection was closed (NETWORK_EXCEPTION)"
