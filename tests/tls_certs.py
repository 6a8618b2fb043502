"""Certificates made at test time (``cryptography``): a CA, a server certificate for 127.0.0.1 and
localhost, client certificates (trusted, expired, signed by an untrusted CA), written as PEM files
(and a PKCS12 keystore) under one directory. Nothing is checked in; every run makes new keys."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PKCS12_PASSWORD = "keystore-secret"


@dataclass(frozen=True)
class Pair:
    cert: Path  # certificate (PEM)
    key: Path  # private key (PEM, unencrypted)
    both: Path  # key + certificate chain in one PEM file (Kafka's PEM keystore file)


@dataclass(frozen=True)
class Certs:
    ca: Path  # the trusted CA certificate (PEM)
    server: Pair
    server_p12: Path  # the server key and chain as PKCS12 (password PKCS12_PASSWORD)
    alice: Pair  # client certificate CN=alice,OU=eng,O=pylog
    expired: Pair  # client certificate of the trusted CA, expired
    stranger: Pair  # client certificate of an untrusted CA
    untrusted_server: Pair  # a server certificate of the untrusted CA
    node: Pair  # a broker's certificate for serving and for its own connections (server + client auth)
    alice_p12: Path  # alice's key and chain as a PKCS12 keystore (password PKCS12_PASSWORD), as Java clients hold it
    ca_p12: Path  # the trusted CA as a PKCS12 truststore (password PKCS12_PASSWORD)


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pylog")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _ca(directory: Path, label: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"pylog test CA {label}"))
        .issuer_name(_name(f"pylog test CA {label}"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"ca-{label}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key, path


def _leaf(
    directory: Path, name: str, subject: x509.Name, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey,
    *, server: bool, expired: bool = False, client_too: bool = False,
) -> tuple[Pair, ec.EllipticCurvePrivateKey, x509.Certificate]:  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    start, end = (now - datetime.timedelta(days=3), now - datetime.timedelta(days=2)) if expired else (
        now - datetime.timedelta(days=1), now + datetime.timedelta(days=2))  # fmt: skip
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                + ([ExtendedKeyUsageOID.CLIENT_AUTH] if server and client_too else [])
            ),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key", directory / f"{name}.pem")
    pair.cert.write_bytes(cert_pem)
    pair.key.write_bytes(key_pem)
    pair.both.write_bytes(key_pem + cert_pem)
    return pair, key, cert


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key, ca_path = _ca(directory, "trusted")
    other, other_key, _ = _ca(directory, "untrusted")
    server, server_key, server_cert = _leaf(directory, "server", _name("localhost"), ca, ca_key, server=True)
    p12 = directory / "server.p12"
    p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"server", server_key, server_cert, [ca],
            serialization.BestAvailableEncryption(PKCS12_PASSWORD.encode()),
        )
    )  # fmt: skip
    alice, alice_key, alice_cert = _leaf(directory, "alice", _name("alice", "eng"), ca, ca_key, server=False)
    encryption = serialization.BestAvailableEncryption(PKCS12_PASSWORD.encode())
    alice_p12 = directory / "alice.p12"
    alice_p12.write_bytes(pkcs12.serialize_key_and_certificates(b"alice", alice_key, alice_cert, [ca], encryption))
    ca_p12 = directory / "truststore.p12"
    ca_p12.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca], encryption))
    expired, _, _ = _leaf(directory, "expired", _name("old"), ca, ca_key, server=False, expired=True)
    stranger, _, _ = _leaf(directory, "stranger", _name("mallory"), other, other_key, server=False)
    untrusted_server, _, _ = _leaf(directory, "fake-server", _name("localhost"), other, other_key, server=True)
    node, _, _ = _leaf(directory, "node", _name("localhost", "brokers"), ca, ca_key, server=True, client_too=True)
    return Certs(ca_path, server, p12, alice, expired, stranger, untrusted_server, node, alice_p12, ca_p12)
