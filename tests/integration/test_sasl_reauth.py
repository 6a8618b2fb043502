"""Issue #15 / KIP-368 (``connections.max.reauth.ms``): with a 3 s session lifetime, confluent-kafka
(librdkafka re-authenticates on SaslAuthenticate v1+) keeps producing on the same connections
across several re-authentications; a client that does not re-authenticate has its connection closed
at its next request once the session expired, as Kafka does."""

from __future__ import annotations

import collections
import re
import socket
import struct
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ApiKey, decode_response, encode_request
from tests.integration.compat import confluent_consume
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

REAUTH_MS = 3000
PASSWORD = "alice-reauth-secret"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'
AUTHENTICATED = re.compile(r"SASL PLAIN: User:alice authenticated from (\S+) on listener")
EXPIRED = "after its SASL session expired"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, str]]:
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS),
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("reauth"), overrides=overrides, python=sys.executable) as b:
        yield b, b.bootstrap_servers


def librdkafka() -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
    }


def logins_per_connection(output: str) -> collections.Counter[str]:
    return collections.Counter(AUTHENTICATED.findall(output))


def test_confluent_kafka_reauthenticates_and_keeps_producing(broker: tuple[EmbeddedBroker, str]) -> None:
    from confluent_kafka import Producer

    node, bootstrap = broker
    before = logins_per_connection(node.output())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **librdkafka()})
    sent: list[bytes] = []

    def reauthenticated_three_times() -> bool:
        value = b"v%d" % len(sent)
        producer.produce("reauth", value=value)
        assert producer.flush(30) == 0
        sent.append(value)
        counts = logins_per_connection(node.output()) - before
        return bool(counts) and max(counts.values()) >= 4  # one login + three re-authentications

    wait_until(reauthenticated_three_times, "a producer connection re-authenticated three times", timeout_s=120)
    assert EXPIRED not in node.output()  # no connection of a re-authenticating client was cut off
    got = confluent_consume(bootstrap, "reauth", len(sent), **librdkafka())
    assert [g.value for g in got] == sent


def _call(sock: socket.socket, api_key: int, version: int, body: dict[str, Any], correlation_id: int) -> Any:
    """The decoded response, or None when the broker closed the connection."""
    sock.sendall(encode_request(api_key, version, correlation_id, "no-reauth", body))
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return decode_response(api_key, version, data[4:])[1]


def test_a_client_that_does_not_reauthenticate_is_closed_after_the_session(
    broker: tuple[EmbeddedBroker, str],
) -> None:
    node, bootstrap = broker
    host, port = bootstrap.rsplit(":", 1)
    metadata = {"topics": None, "allow_auto_topic_creation": False}
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        assert _call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, 1).error_code == 0
        token = b"\0alice\0" + PASSWORD.encode()
        answer = _call(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token}, 2)
        assert (answer.error_code, answer.session_lifetime_ms) == (0, REAUTH_MS)
        served = 0
        correlation = iter(range(3, 1 << 30))

        def closed() -> bool:
            nonlocal served
            if _call(sock, ApiKey.METADATA, 1, metadata, next(correlation)) is None:
                return True
            served += 1
            return False

        wait_until(closed, "the broker closing the expired connection", timeout_s=60)
        assert served >= 1  # served while the session lasted
    assert EXPIRED in wait_until(lambda: EXPIRED in node.output() and node.output(), "the log line", timeout_s=30)
    assert node.running
