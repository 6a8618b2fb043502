"""Issue #15 (TLS): one broker serves PLAINTEXT, SSL (PEM keystore file) and MTLS (an SSL listener
with a PKCS12 keystore and ``ssl.client.auth=required``) at once; confluent-kafka, kafka-python,
aiokafka, kcat and pylog's own client and CLI produce and consume over SSL and mTLS. Untrusted,
expired and missing client certificates, plaintext sent to a TLS port and TLS garbage are refused
cleanly, and the other clients keep working. Certificates are made at test time (tests/tls_certs.py).
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ApiKey, encode_request
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
from tests.tls_certs import PKCS12_PASSWORD, Certs, make_certs

pytestmark = pytest.mark.integration

COUNT = 20


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: Certs
) -> Iterator[tuple[EmbeddedBroker, dict[str, str]]]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server.both),
        "listener.name.mtls.ssl.keystore.type": "PKCS12",
        "listener.name.mtls.ssl.keystore.location": str(certs.server_p12),
        "listener.name.mtls.ssl.keystore.password": PKCS12_PASSWORD,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(certs.ca),
        "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("tls-broker"), overrides=overrides, python=sys.executable) as broker:
        ready = re.search(r"pylog broker ready: .*listeners=(\S+)", broker.output())
        assert ready is not None
        yield broker, dict(uri.split("://") for uri in ready.group(1).split(","))


def librdkafka_tls(certs: Certs, *, mutual: bool) -> dict[str, str]:
    config = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    if mutual:
        config |= {"ssl.certificate.location": str(certs.alice.cert), "ssl.key.location": str(certs.alice.key)}
    return config


def python_context(certs: Certs, *, mutual: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if mutual:
        ctx.load_cert_chain(str(certs.alice.cert), str(certs.alice.key))
    return ctx


MODES = [("SSL", False), ("MTLS", True)]
MODE_IDS = ["ssl", "mtls"]


@pytest.mark.parametrize(("listener", "mutual"), MODES, ids=MODE_IDS)
def test_confluent_kafka(tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, listener: str, mutual: bool):
    _, addresses = tls_broker
    records = numbered_records("ck", 0, COUNT, value_bytes=70_000)  # > sendfile's threshold per fetch
    topic = f"tls-confluent-{listener.lower()}"
    extra = librdkafka_tls(certs, mutual=mutual)
    assert len(confluent_produce(addresses[listener], topic, records, **extra)) == COUNT
    got = confluent_consume(addresses[listener], topic, COUNT, **extra)
    assert [g.value for g in got] == [r.value for r in records]


@pytest.mark.parametrize(("listener", "mutual"), MODES, ids=MODE_IDS)
def test_kafka_python(tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, listener: str, mutual: bool):
    _, addresses = tls_broker
    records = numbered_records("kp", 0, COUNT, value_bytes=70_000)
    topic = f"tls-kafka-python-{listener.lower()}"
    extra: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": str(certs.ca)}
    if mutual:
        extra |= {"ssl_certfile": str(certs.alice.cert), "ssl_keyfile": str(certs.alice.key)}
    assert len(kp_produce(addresses[listener], topic, records, **extra)) == COUNT
    got = kp_consume(addresses[listener], topic, COUNT, **extra)
    assert [g.value for g in got] == [r.value for r in records]


@pytest.mark.parametrize(("listener", "mutual"), MODES, ids=MODE_IDS)
def test_aiokafka(tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, listener: str, mutual: bool):
    _, addresses = tls_broker
    records = numbered_records("aio", 0, COUNT, value_bytes=70_000)
    topic = f"tls-aiokafka-{listener.lower()}"
    extra = {"security_protocol": "SSL", "ssl_context": python_context(certs, mutual=mutual)}
    assert len(aio_produce(addresses[listener], topic, records, **extra)) == COUNT
    got = aio_consume(addresses[listener], topic, COUNT, **extra)
    assert [g.value for g in got] == [r.value for r in records]


@pytest.mark.parametrize(("listener", "mutual"), MODES, ids=MODE_IDS)
def test_kcat(tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, listener: str, mutual: bool):
    _, addresses = tls_broker
    topic = f"tls-kcat-{listener.lower()}"
    args = [arg for key, value in librdkafka_tls(certs, mutual=mutual).items() for arg in ("-X", f"{key}={value}")]
    pairs = [(b"k%d" % i, b"v%d" % i * 1000) for i in range(COUNT)]
    kcat_produce(addresses[listener], topic, pairs, extra=args)
    got = kcat_consume(addresses[listener], topic, COUNT, extra=args)
    assert [g.value for g in got] == [v for _, v in pairs]


@pytest.mark.parametrize(("listener", "mutual"), MODES, ids=MODE_IDS)
def test_pylog_client(tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, listener: str, mutual: bool):
    _, addresses = tls_broker
    topic = f"tls-pylog-{listener.lower()}"
    config = {"bootstrap.servers": addresses[listener], **librdkafka_tls(certs, mutual=mutual)}
    pylog_round_trip(config, topic, [b"x" * 70_000 + b"%d" % i for i in range(COUNT)], what="pylog consumer over TLS")


def test_pylog_client_with_java_clients_pkcs12_stores(tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs):
    """mTLS with the Java client's keys, as Spark's ``kafka.ssl.*`` options (and Databricks) give
    them: a PKCS12 truststore and a PKCS12 keystore with their passwords, and Java's empty
    ``ssl.endpoint.identification.algorithm``; confluent-kafka reads what pylog's client wrote."""
    _, addresses = tls_broker
    config = {
        "bootstrap.servers": addresses["MTLS"],
        "security.protocol": "SSL",
        "ssl.truststore.location": str(certs.ca_p12),
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.password": PKCS12_PASSWORD,
        "ssl.keystore.location": str(certs.alice_p12),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.password": PKCS12_PASSWORD,
        "ssl.endpoint.identification.algorithm": "",
    }
    values = [b"java-stores-%d" % i for i in range(COUNT)]
    pylog_round_trip(config, "tls-java-stores", values, what="pylog consumer with PKCS12 stores")
    got = confluent_consume(addresses["MTLS"], "tls-java-stores", COUNT, **librdkafka_tls(certs, mutual=True))
    assert [g.value for g in got] == values


@pytest.mark.parametrize(("listener", "mutual"), MODES, ids=MODE_IDS)
def test_pylog_batch_api_over_tls(
    tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, listener: str, mutual: bool
):
    """The batch API writes a request's records section to the transport as it is, beside the
    frame's other bytes (``BatchParts``); over TLS the records read back unchanged."""
    import pyarrow as pa

    from pyspark_log.client import Producer

    _, addresses = tls_broker
    topic = f"tls-batch-{listener.lower()}"
    config = {"bootstrap.servers": addresses[listener], **librdkafka_tls(certs, mutual=mutual)}
    values = [b"%d-" % i + b"v" * 30_000 for i in range(COUNT)]  # a section of several 64 KiB
    with Producer(config) as producer:
        assert producer.send_batch(topic, pa.table({"value": values}), partition=0).result(timeout=30) == COUNT
    got = confluent_consume(addresses[listener], topic, COUNT, **librdkafka_tls(certs, mutual=mutual))
    assert [g.value for g in got] == values


def test_pylog_cli_with_command_config(tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, tmp_path: Path):
    """``--command-config FILE`` as Kafka's tools take it, with librdkafka's ssl.* names."""
    _, addresses = tls_broker
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in librdkafka_tls(certs, mutual=True).items()), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    base = [
        sys.executable,
        "-m",
        "pyspark_log.cli",
        "--bootstrap-server",
        addresses["MTLS"],
        "--command-config",
        str(config),
    ]
    created = subprocess.run(
        [*base, "topics", "create", "tls-cli", "--partitions", "1"],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    listed = subprocess.run([*base, "topics", "list"], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert listed.returncode == 0, listed.stderr
    assert "tls-cli" in listed.stdout.split()


def handshake(address: str, ctx: ssl.SSLContext) -> None:
    host, port = address.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=20) as raw,
        ctx.wrap_socket(raw, server_hostname=host) as s,
    ):
        # under TLS 1.3 a refused client certificate is reported at the first read
        s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "probe", {}))
        if not s.recv(4):
            raise ConnectionError("closed")


def test_bad_clients_are_refused_cleanly_and_others_keep_working(
    tls_broker: tuple[EmbeddedBroker, dict[str, str]], certs: Certs
) -> None:
    broker, addresses = tls_broker
    # a client certificate of an unknown CA, an expired one, none at all: refused on the mTLS listener
    for pair in (certs.stranger, certs.expired, None):
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        if pair is not None:
            ctx.load_cert_chain(str(pair.cert), str(pair.key))
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            handshake(addresses["MTLS"], ctx)
    # a client that does not trust the broker's certificate gives up itself
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(addresses["SSL"], ssl.create_default_context(cafile=str(certs.untrusted_server.cert)))
    # plaintext Kafka to a TLS port: the broker closes the connection (answering only with a TLS alert)
    host, port = addresses["SSL"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as s:
        s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "plaintext", {}))
        received = b""
        while chunk := s.recv(4096):
            received += chunk
        assert not received or received[0] == 0x15  # nothing, or a TLS alert record
    assert broker.running
    assert "TLS handshake with 127.0.0.1:" in broker.output()
    # everyone else is still served
    records = numbered_records("after", 0, 5)
    for listener, extra in (("PLAINTEXT", {}), ("SSL", librdkafka_tls(certs, mutual=False))):
        topic = f"tls-after-refusals-{listener.lower()}"
        assert len(confluent_produce(addresses[listener], topic, records, **extra)) == 5
        assert len(confluent_consume(addresses[listener], topic, 5, **extra)) == 5
