"""Kafka's TLS key and trust stores (``ssl.keystore.*``, ``ssl.truststore.*``) read without Java,
for the broker's listeners and for pylog's client alike.

``ssl.*.type`` names the store's format: ``PEM`` (KIP-651: certificates, and for a keystore the
private key, in one PEM file) or ``PKCS12`` (read with the ``cryptography`` package, the ``tls``
extra). Java's ``JKS`` format cannot be read here; a Java 9+ ``JKS`` store type also reads PKCS12
files, so ``read_store`` tries a file given as ``JKS`` as PKCS12 before refusing it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

STORE_TYPES = ("PEM", "PKCS12", "JKS")
JKS_HINT = "convert it: keytool -importkeystore -deststoretype PKCS12"


class StoreError(ValueError):
    """A store that cannot be used; the message names no secret."""


class NeedsCryptography(StoreError):
    """A PKCS12 store was given but the ``cryptography`` package is not installed."""


def pkcs12_to_pem(data: bytes, password: str) -> bytes:
    """The private key (unencrypted PKCS8) and every certificate of a PKCS12 file, as PEM."""
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12
    except ImportError:
        raise NeedsCryptography("PKCS12 needs the 'cryptography' package (pip install cryptography)") from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        raise StoreError("not a PKCS12 file, or the password is wrong") from None
    pem = b""
    if key is not None:
        pem += key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    for c in ([cert] if cert is not None else []) + list(extra or []):
        pem += c.public_bytes(Encoding.PEM)
    return pem


def read_store(data: bytes, kind: str, password: str) -> bytes:
    """A store's content as PEM: PEM as it is, PKCS12 converted; ``JKS`` is tried as PKCS12
    (Java reads PKCS12 under that type) and refused with how to convert it when it is not."""
    kind = kind.upper()
    if kind == "PEM":
        return data
    if kind == "PKCS12":
        return pkcs12_to_pem(data, password)
    if kind == "JKS":
        try:
            return pkcs12_to_pem(data, password)
        except NeedsCryptography:
            raise
        except StoreError:
            raise StoreError(f"a JKS store cannot be read ({JKS_HINT}) or the password is wrong") from None
    raise StoreError(f"unknown store type {kind!r}: use PEM or PKCS12")


@contextmanager
def private_file(data: bytes) -> Iterator[str]:
    """``data`` in a file only this user can read, removed when the block ends (for
    ``SSLContext.load_cert_chain``, which takes paths only)."""
    with tempfile.TemporaryDirectory(prefix="pylog-tls-") as directory:
        path = os.path.join(directory, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
