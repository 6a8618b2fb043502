"""KIP-848 consumer groups under ACLs, as Kafka 4.1's ``KafkaApis`` checks them:
ConsumerGroupHeartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every
subscribed topic name (TOPIC_AUTHORIZATION_FAILED, no message); ConsumerGroupDescribe needs
DESCRIBE on the group, and a group whose members' current or target assignment names a topic the
client may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED ("The group has described topic(s)
that the client is not authorized to describe.") without its members. Driven by confluent-kafka
with ``group.protocol=consumer`` and by raw requests over SASL/PLAIN; the broker and helpers are
those of ``test_acls`` (Kafka's StandardAuthorizer semantics)."""

from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ApiKey, decode_response, encode_request
from tests.integration.test_acls import (
    GROUP,
    TOPIC,
    USERS,
    A,
    acl,
    addresses,
    as_user,
    code_of,
    consumer_error,
    create_topic,
    grant,
    overrides,
    produce_error,
    revoke,
    unique,
)
from tests.waiting import Deadline

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("kip848-acls"), overrides=overrides(), python=sys.executable) as b:
        yield b


def _frame(sock: socket.socket) -> bytes:
    def read(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    return read(struct.unpack(">i", read(4))[0])


def as_user_request(broker: EmbeddedBroker, user: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """One request after a SASL/PLAIN login as ``user`` on the SASL_PLAINTEXT listener."""
    host, port = addresses(broker)["SASL_PLAINTEXT"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "kip848-acls", {"mechanism": "PLAIN"}))
        assert decode_response(ApiKey.SASL_HANDSHAKE, 1, _frame(sock))[1].error_code == 0
        token = b"\x00" + user.encode() + b"\x00" + USERS[user].encode()
        sock.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, 2, 2, "kip848-acls", {"auth_bytes": token}))
        assert decode_response(ApiKey.SASL_AUTHENTICATE, 2, _frame(sock))[1].error_code == 0
        sock.sendall(encode_request(api_key, version, 3, "kip848-acls", body))
        return decode_response(api_key, version, _frame(sock))[1]


COORDINATOR_ERRORS = (KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
                      KafkaError.COORDINATOR_LOAD_IN_PROGRESS)  # fmt: skip


def join(broker: EmbeddedBroker, user: str, group: str, topics: list[str]) -> Any:
    """A joining heartbeat; retried while the group's coordinator is still being set up (the
    first FindCoordinator creates ``__consumer_offsets``), as a client would."""
    body = {"group_id": group, "member_id": unique("m"), "member_epoch": 0, "rebalance_timeout_ms": 30_000,
            "subscribed_topic_names": topics, "topic_partitions": []}  # fmt: skip
    deadline = Deadline(60)
    while True:
        find = {"key_type": 0, "coordinator_keys": [group]}
        answer = as_user_request(broker, "root", ApiKey.FIND_COORDINATOR, 4, find)
        if answer.coordinators[0].error_code == 0:
            answer = as_user_request(broker, user, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
            if answer.error_code not in COORDINATOR_ERRORS:
                return answer
        assert not deadline.expired(), answer
        time.sleep(0.2)  # a retry backoff, not a synchronisation


def test_heartbeat_needs_read_on_the_group_and_describe_on_each_subscribed_topic(broker: EmbeddedBroker) -> None:
    topic, other, group = create_topic(broker, unique("t")), create_topic(broker, unique("u")), unique("g")
    assert join(broker, "reader", group, [topic]).error_code == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(broker, acl(GROUP, group, "User:reader", A.READ))
    answer = join(broker, "reader", group, [topic])
    assert (answer.error_code, answer.error_message) == (KafkaError.TOPIC_AUTHORIZATION_FAILED, None)
    grant(broker, acl(TOPIC, topic, "User:reader", A.DESCRIBE))
    answer = join(broker, "reader", group, [topic])
    assert answer.error_code == 0
    assert answer.member_epoch >= 1
    # one topic of two not describable: the whole heartbeat is refused
    assert join(broker, "reader", group, [topic, other]).error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_describe_hides_a_group_assigned_an_undescribable_topic(broker: EmbeddedBroker) -> None:
    topic, group = create_topic(broker, unique("t")), unique("g")
    assert join(broker, "root", group, [topic]).error_code == 0  # root is a super user
    grant(broker, acl(GROUP, group, "User:reader", A.DESCRIBE))
    body = {"group_ids": [group], "include_authorized_operations": False}
    (described,) = as_user_request(broker, "reader", ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body).groups
    assert described.error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert described.error_message == "The group has described topic(s) that the client is not authorized to describe."
    assert list(described.members) == []
    grant(broker, acl(TOPIC, topic, "User:reader", A.DESCRIBE))
    (described,) = as_user_request(broker, "reader", ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body).groups
    assert described.error_code == 0
    assert len(described.members) == 1


def test_a_consumer_protocol_member_needs_exactly_read_on_the_topic_and_the_group(broker: EmbeddedBroker) -> None:
    topic, group = create_topic(broker, unique("cg")), unique("group")
    assert produce_error({"bootstrap.servers": addresses(broker)["PLAINTEXT"]}, topic) is None
    config = as_user(broker, "etl", **{"group.id": group, "group.protocol": "consumer"})
    topic_read, group_read = acl(TOPIC, topic, "User:etl", A.READ), acl(GROUP, group, "User:etl", A.READ)
    grant(broker, topic_read)
    assert code_of(consumer_error(config, topic)) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(broker, group_read)
    assert consumer_error(config, topic) is None  # heartbeats, fetches and commits with its member epoch
    revoke(broker, topic_read)
    assert code_of(consumer_error(config, topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
