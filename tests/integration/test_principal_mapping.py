"""Issue #15 / KIP-371 (``ssl.principal.mapping.rules``): an mTLS listener maps the client
certificate's distinguished name with Kafka's rule syntax. alice's certificate
(``CN=alice,OU=eng,O=pylog``) becomes ``User:alice``; confluent-kafka produces and consumes with
it. A trusted certificate no rule applies to (``CN=localhost,OU=brokers``) is refused as Kafka
refuses it (no DEFAULT rule), and the broker keeps serving."""

from __future__ import annotations

import socket
import ssl
import sys
from collections.abc import Iterator

import pytest

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ApiKey, encode_request
from tests.integration.compat import confluent_consume, confluent_produce, numbered_records
from tests.tls_certs import Certs, make_certs
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

RULES = "RULE:^CN=(.*?),OU=eng,.*$/$1/L"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[EmbeddedBroker]:
    overrides = {
        "listeners": "MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server.both),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": RULES,
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("mapping"), overrides=overrides, python=sys.executable) as b:
        yield b


def test_mapped_principal_produces_and_an_unmapped_certificate_is_refused(broker: EmbeddedBroker, certs: Certs) -> None:
    extra = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.alice.cert),
        "ssl.key.location": str(certs.alice.key),
    }
    records = numbered_records("map", 0, 10)
    assert len(confluent_produce(broker.bootstrap_servers, "mapped", records, **extra)) == 10
    assert "authenticated as User:alice on listener MTLS" in broker.output()

    host, port = broker.bootstrap_servers.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    ctx.load_cert_chain(str(certs.node.cert), str(certs.node.key))  # trusted, but OU=brokers
    with socket.create_connection((host, int(port)), timeout=20) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as sock:
                body = {"client_software_name": "t", "client_software_version": "1"}
                sock.sendall(encode_request(ApiKey.API_VERSIONS, 3, 1, "unmapped", body))
                assert sock.recv(4) == b""  # closed without an answer
        except OSError:
            pass  # or the close arrived as a TLS error
    wait_until(
        lambda: "no rule of ssl.principal.mapping.rules applies to CN=localhost,OU=brokers" in broker.output(),
        "the unmapped certificate refused in the broker log",
    )
    got = confluent_consume(broker.bootstrap_servers, "mapped", 10, **extra)  # the broker keeps serving
    assert [g.value for g in got] == [r.value for r in records]
