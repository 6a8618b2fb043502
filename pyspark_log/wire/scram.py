"""Kafka's SCRAM mechanisms (RFC 5802 / 7677; KIP-554's ``ScramMechanism``): the hash function of
each and the type id DescribeUserScramCredentials / AlterUserScramCredentials carry. One table for
the broker's SASL server and credential records and the client's login and admin calls."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SCRAM_DIGESTS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}  # hashlib names
SCRAM_MECHANISM_IDS: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_MECHANISM_NAMES: dict[int, str] = {v: k for k, v in SCRAM_MECHANISM_IDS.items()}


class ScramError(ValueError):
    """The server's side of a SCRAM exchange cannot be trusted (bad nonce, bad signature, garbage)."""


class ScramClient:
    """The client side of SCRAM (RFC 5802 / 7677), no channel binding: ``first()``, then
    ``final(server_first)`` (PBKDF2: run it off an event loop), then ``verify(server_final)``.
    Used by pylog's client and by the broker's own connections to other nodes."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self._digest = SCRAM_DIGESTS[mechanism]
        self._password = password
        name = user.replace("=", "=3D").replace(",", "=2C")
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(18)).decode()
        self._first_bare = f"n={name},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            text = server_first.decode()
            attrs = dict(part.split("=", 1) for part in text.split(","))
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (ValueError, KeyError, UnicodeDecodeError):
            raise ScramError("SCRAM: the server's first message cannot be read") from None
        if not nonce.startswith(self._nonce):
            raise ScramError("SCRAM: the server's nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(self._digest, self._password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._digest).digest()
        stored_key = hashlib.new(self._digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self._digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self._digest).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._digest).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final, expected):
            raise ScramError("SCRAM: the server's signature is wrong (not the broker we trust?)")
