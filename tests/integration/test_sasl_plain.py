"""Issue #15 (SASL/PLAIN): one broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners, users
from each listener's JAAS value as Kafka writes it; confluent-kafka, kafka-python, aiokafka, kcat
and pylog's client produce and consume on both SASL listeners. Wrong passwords and unknown users
get SASL_AUTHENTICATION_FAILED and a closed connection, the broker logs who failed from where
(never the password), requests before authentication close the connection, and everyone else
keeps working."""

from __future__ import annotations

import re
import socket
import struct
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ApiKey, decode_response, encode_request
from tests.integration.compat import (
    aio_consume,
    aio_produce,
    confluent_consume,
    confluent_produce,
    kcat_consume,
    kcat_produce,
    kp_consume,
    kp_produce,
    numbered_records,
    pylog_round_trip,
)
from tests.tls_certs import Certs, make_certs
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

COUNT = 20
PASSWORD = "alice-secret-9f2"
JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" '
    f'user_admin="admin-pw" user_alice="{PASSWORD}";'
)
PROTOCOLS = ["SASL_PLAINTEXT", "SASL_SSL"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[tuple[EmbeddedBroker, dict[str, str]]]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server.both),
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("sasl"), overrides=overrides, python=sys.executable) as broker:
        ready = re.search(r"pylog broker ready: .*listeners=(\S+)", broker.output())
        assert ready is not None
        yield broker, dict(uri.split("://") for uri in ready.group(1).split(","))


def librdkafka(protocol: str, certs: Certs, password: str = PASSWORD, user: str = "alice") -> dict[str, str]:
    config = {
        "security.protocol": protocol,
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        config["ssl.ca.location"] = str(certs.ca)
    return config


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_confluent_kafka(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str) -> None:
    _, addresses = node
    records = numbered_records("ck", 0, COUNT, value_bytes=70_000)
    topic = f"plain-confluent-{protocol.lower()}"
    extra = librdkafka(protocol, certs)
    assert len(confluent_produce(addresses[protocol], topic, records, **extra)) == COUNT
    assert [g.value for g in confluent_consume(addresses[protocol], topic, COUNT, **extra)] == [
        r.value for r in records
    ]


def python_client(protocol: str, certs: Certs) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "security_protocol": protocol,
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": PASSWORD,
    }
    return extra


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_kafka_python(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str) -> None:
    _, addresses = node
    records = numbered_records("kp", 0, COUNT, value_bytes=70_000)
    topic = f"plain-kafka-python-{protocol.lower()}"
    extra = python_client(protocol, certs)
    if protocol == "SASL_SSL":
        extra["ssl_cafile"] = str(certs.ca)
    assert len(kp_produce(addresses[protocol], topic, records, **extra)) == COUNT
    assert [g.value for g in kp_consume(addresses[protocol], topic, COUNT, **extra)] == [r.value for r in records]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_aiokafka(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str) -> None:
    import ssl

    _, addresses = node
    records = numbered_records("aio", 0, COUNT, value_bytes=70_000)
    topic = f"plain-aiokafka-{protocol.lower()}"
    extra = python_client(protocol, certs)
    if protocol == "SASL_SSL":
        extra["ssl_context"] = ssl.create_default_context(cafile=str(certs.ca))
    assert len(aio_produce(addresses[protocol], topic, records, **extra)) == COUNT
    assert [g.value for g in aio_consume(addresses[protocol], topic, COUNT, **extra)] == [r.value for r in records]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_kcat(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str) -> None:
    _, addresses = node
    topic = f"plain-kcat-{protocol.lower()}"
    args = [arg for key, value in librdkafka(protocol, certs).items() for arg in ("-X", f"{key}={value}")]
    pairs = [(b"k%d" % i, b"v%d" % i * 1000) for i in range(COUNT)]
    kcat_produce(addresses[protocol], topic, pairs, extra=args)
    assert [g.value for g in kcat_consume(addresses[protocol], topic, COUNT, extra=args)] == [v for _, v in pairs]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_pylog_client(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str) -> None:
    _, addresses = node
    topic = f"plain-pylog-{protocol.lower()}"
    config = {"bootstrap.servers": addresses[protocol], **librdkafka(protocol, certs)}
    pylog_round_trip(config, topic, [b"y" * 70_000 + b"%d" % i for i in range(COUNT)], what="pylog consumer over SASL")


def _frames(sock: socket.socket) -> Iterator[bytes]:
    buf = b""
    while True:
        while len(buf) >= 4 and len(buf) - 4 >= struct.unpack(">i", buf[:4])[0]:
            size = struct.unpack(">i", buf[:4])[0]
            yield buf[4 : 4 + size]
            buf = buf[4 + size :]
        chunk = sock.recv(65536)
        if not chunk:
            return
        buf += chunk


def raw_login(address: str, user: bytes, password: bytes) -> tuple[Any, bytes]:
    """SaslHandshake v1 + SaslAuthenticate v2 on a fresh SASL_PLAINTEXT connection: the
    authenticate response, and what the broker sends afterwards until it closes (b"" = closed)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        frames = _frames(sock)
        sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "t", {"mechanism": "PLAIN"}))
        _, handshake = decode_response(ApiKey.SASL_HANDSHAKE, 1, next(frames))
        assert handshake.error_code == 0
        assert handshake.mechanisms == ["PLAIN"]
        sock.sendall(
            encode_request(ApiKey.SASL_AUTHENTICATE, 2, 2, "t", {"auth_bytes": b"\0" + user + b"\0" + password})
        )
        _, answer = decode_response(ApiKey.SASL_AUTHENTICATE, 2, next(frames))
        if answer.error_code:
            return answer, b"".join(frames)  # the broker closes: the generator ends
        return answer, b"open"


def test_failed_logins_are_refused_logged_without_the_password_and_others_keep_working(
    node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs
) -> None:
    broker, addresses = node
    address = addresses["SASL_PLAINTEXT"]
    for user, password in ((b"alice", b"wrong-pw-x1"), (b"mallory", b"whatever-pw-x2")):
        answer, after = raw_login(address, user, password)
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert after == b""  # closed right after the response
    ok, _ = raw_login(address, b"alice", PASSWORD.encode())
    assert ok.error_code == 0

    def logged() -> bool:
        return "user 'mallory' from 127.0.0.1:" in broker.output() and "user 'alice' from 127.0.0.1:" in broker.output()

    wait_until(logged, "the failed logins in the broker log")
    for secret in ("wrong-pw-x1", "whatever-pw-x2", PASSWORD):
        assert secret not in broker.output()
    # a request before authentication closes the connection, unanswered
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(encode_request(ApiKey.METADATA, 12, 1, "t", {"topics": None, "allow_auto_topic_creation": False}))
        assert list(_frames(sock)) == []
    # librdkafka with a wrong password fails, then everyone else is still served
    with pytest.raises(AssertionError):
        confluent_produce(address, "plain-denied", numbered_records("x", 0, 1), **librdkafka(
            "SASL_PLAINTEXT", certs, password="nope"), **{"message.timeout.ms": 3000})  # fmt: skip
    records = numbered_records("after", 0, 5)
    for protocol in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"):
        extra = librdkafka(protocol, certs) if protocol != "PLAINTEXT" else {}
        topic = f"plain-after-{protocol.lower()}"
        assert len(confluent_produce(addresses[protocol], topic, records, **extra)) == 5
    assert broker.running
