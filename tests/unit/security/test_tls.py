"""Issue #15 (TLS): server contexts from Kafka's ssl.* keys (KIP-651 PEM, PKCS12, per listener),
and ``TlsSession`` on a real socket pair: handshake, principal from the client certificate
(Kafka's DEFAULT mapping), bytes both ways."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest

from broker.network.tls import TlsSession
from broker.security.tls import TlsConfigError, listener_settings, openssl_cipher_name, server_context
from tests.tls_certs import PKCS12_PASSWORD, Certs, make_certs

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def settings(**given: str) -> dict[str, str]:
    return listener_settings({k.replace("_", "."): v for k, v in given.items()}, "SSL")


def test_listener_settings_override_the_plain_ones() -> None:
    raw = {"ssl.client.auth": "none", "listener.name.mtls.ssl.client.auth": "required", "ssl.keystore.type": "PEM"}
    assert listener_settings(raw, "MTLS")["ssl.client.auth"] == "required"
    assert listener_settings(raw, "SSL")["ssl.client.auth"] == "none"
    assert listener_settings(raw, "MTLS")["ssl.keystore.type"] == "PEM"
    assert listener_settings({}, "SSL")["ssl.keystore.type"] == "JKS"  # Kafka's default (refused when used)


def test_pem_file_inline_pem_and_pkcs12_keystores_load(certs: Certs) -> None:
    server_context(settings(ssl_keystore_type="PEM", ssl_keystore_location=str(certs.server.both)), "SSL")
    inline = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": certs.server.cert.read_text(),
        "ssl.keystore.key": certs.server.key.read_text(),
    }
    server_context(listener_settings(inline, "SSL"), "SSL")
    p12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs.server_p12)}
    server_context(listener_settings({**p12, "ssl.keystore.password": PKCS12_PASSWORD}, "SSL"), "SSL")
    with pytest.raises(TlsConfigError, match=r"ssl.keystore.location \(listener SSL\): not a PKCS12 file, or"):
        server_context(listener_settings({**p12, "ssl.keystore.password": "wrong"}, "SSL"), "SSL")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"ssl.keystore.location": "/etc/kafka/b.jks"}, "ssl.keystore.type \\(listener SSL\\)=JKS is not supported"),
        ({"ssl.keystore.type": "PEM"}, "ssl.keystore.location \\(listener SSL\\) is required"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "x"}, "give it together with ssl.keystore.key"),
        (
            {"ssl.client.auth": "required"},
            "ssl.truststore.location \\(listener SSL\\) \\(or ssl.truststore.certificates\\)",
        ),
        ({"ssl.client.auth": "maybe"}, "must be none, requested or required"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "only TLSv1.2 and TLSv1.3"),
        ({"ssl.cipher.suites": "NOT-A-CIPHER"}, "no cipher suite in it is available"),
    ],
)
def test_unusable_settings_name_the_key(certs: Certs, given: dict[str, str], message: str) -> None:
    base = {} if "ssl.keystore.type" in given or "ssl.keystore.location" in given else {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server.both)}  # fmt: skip
    with pytest.raises(TlsConfigError, match=message):
        server_context(listener_settings({**base, **given}, "SSL"), "SSL")


def test_kafka_cipher_suite_names_become_openssl_names() -> None:
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384") == "ECDHE-ECDSA-AES256-GCM-SHA384"
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-RSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("ECDHE-RSA-AES128-GCM-SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"


def _session_exchange(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str, bytes, bytes]:
    async def run() -> tuple[str, bytes, bytes]:
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        session = TlsSession(ours, server)

        def peer() -> bytes:
            with client.wrap_socket(theirs, server_hostname="localhost") as s:
                s.sendall(b"hello")
                return s.recv(5)

        answer = asyncio.get_running_loop().run_in_executor(None, peer)
        try:
            await session.handshake()
            buf = bytearray(5)
            got = bytearray()
            while len(got) < 5:
                n = await session.recv_into(memoryview(buf)[: 5 - len(got)])
                got += buf[:n]
            await session.sendall(b"world")
            return session.principal(), bytes(got), await answer
        finally:
            ours.close()

    return asyncio.run(run())


def test_mutual_tls_principal_is_the_certificate_subject(certs: Certs) -> None:
    server = server_context(
        settings(
            ssl_keystore_type="PEM", ssl_keystore_location=str(certs.server.both), ssl_client_auth="required",
            ssl_truststore_type="PEM", ssl_truststore_location=str(certs.ca),
        ),
        "SSL",
    )  # fmt: skip
    client = ssl.create_default_context(cafile=str(certs.ca))
    client.load_cert_chain(str(certs.alice.cert), str(certs.alice.key))
    principal, got, answer = _session_exchange(server, client)
    assert principal == "User:CN=alice,OU=eng,O=pylog"
    assert (got, answer) == (b"hello", b"world")


def test_without_client_auth_the_principal_is_anonymous(certs: Certs) -> None:
    server = server_context(settings(ssl_keystore_type="PEM", ssl_keystore_location=str(certs.server.both)), "SSL")
    principal, got, answer = _session_exchange(server, ssl.create_default_context(cafile=str(certs.ca)))
    assert principal == "User:ANONYMOUS"
    assert (got, answer) == (b"hello", b"world")


def test_tls12_only(certs: Certs, tmp_path: Path) -> None:
    server = server_context(
        settings(
            ssl_keystore_type="PEM", ssl_keystore_location=str(certs.server.both), ssl_enabled_protocols="TLSv1.2"
        ),
        "SSL",
    )
    client = ssl.create_default_context(cafile=str(certs.ca))
    client.minimum_version = ssl.TLSVersion.TLSv1_3
    with pytest.raises(ssl.SSLError):
        _session_exchange(server, client)


def test_cipher_suites_restrict_tls12_with_kafkas_names(certs: Certs) -> None:
    """``ssl.cipher.suites`` in Kafka's (IANA) spelling picks the TLS 1.2 suite that is negotiated."""
    server = server_context(
        settings(
            ssl_keystore_type="PEM", ssl_keystore_location=str(certs.server.both), ssl_enabled_protocols="TLSv1.2",
            ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        ),
        "SSL",
    )  # fmt: skip
    assert [c["name"] for c in server.get_ciphers() if c["protocol"] == "TLSv1.2"] == ["ECDHE-ECDSA-AES256-GCM-SHA384"]
    client = ssl.create_default_context(cafile=str(certs.ca))
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    _, got, answer = _session_exchange(server, client)
    assert (got, answer) == (b"hello", b"world")
    only_other = ssl.create_default_context(cafile=str(certs.ca))
    only_other.maximum_version = ssl.TLSVersion.TLSv1_2
    only_other.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    with pytest.raises(ssl.SSLError):
        _session_exchange(server, only_other)
