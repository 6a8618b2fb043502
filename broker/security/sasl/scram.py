"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) server, as Kafka's ``ScramSaslServer``.

Credentials are stored salted (``ScramCredential``: salt, StoredKey, ServerKey, iterations; the
password is never kept), derived by ``credential_from_salted_password`` from the SaltedPassword an
AlterUserScramCredentials request carries (the client salts, as Kafka's admin client does).

Exchange (no channel binding, ``n,,``; Kafka's extensions such as ``tokenauth`` refused):

    client-first  n,,n=<user>,r=<cnonce>
    server-first  r=<cnonce><snonce>,s=<salt b64>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<ClientProof b64>
    server-final  v=<ServerSignature b64>

An unknown user gets a server-first made from a salt derived from the user name and a secret, so
the exchange does not tell unknown users from wrong passwords until the same final failure.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from broker.security.sasl.errors import SaslFailure
from pyspark_log.wire.scram import SCRAM_DIGESTS, SCRAM_MECHANISM_IDS

MECHANISMS = SCRAM_DIGESTS
MECHANISM_IDS = SCRAM_MECHANISM_IDS  # Kafka's ScramMechanism type ids
MIN_ITERATIONS = 4096  # Kafka's bounds for AlterUserScramCredentials
MAX_ITERATIONS = 16384
_FAKE_SECRET = secrets.token_bytes(32)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


CredentialLookup = Callable[[str, str], "ScramCredential | None"]  # (user, mechanism) -> credential


def _hmac(digest: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, digest).digest()


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    digest = MECHANISMS[mechanism]
    client_key = _hmac(digest, salted_password, b"Client Key")
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = _hmac(digest, salted_password, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi() of RFC 5802 (PBKDF2-HMAC): CPU-heavy, for clients and tests, not the event loop."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslFailure("Invalid SCRAM message: expected attribute=value pairs")
        out[key] = value
    return out


def _unescape_name(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslFailure("Invalid SCRAM user name encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM authentication; ``step`` twice (client-first, client-final)."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self.mechanism = mechanism
        self._digest = MECHANISMS[mechanism]
        self._lookup = lookup
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._fake = False
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._state = "FIRST"

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SCRAM message: not UTF-8") from None
        if self._state == "FIRST":
            return self._first(text), None
        if self._state == "FINAL":
            return self._final(text)
        raise SaslFailure("SCRAM authentication is already complete")

    def _first(self, text: str) -> bytes:
        gs2, sep, bare = text.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise SaslFailure("Invalid SCRAM client-first message (channel binding is not supported)")
        attrs = _attributes(bare)
        if set(attrs) - {"n", "r"}:
            raise SaslFailure("SCRAM extensions are not supported")
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise SaslFailure("Invalid SCRAM client-first message: user name and nonce are required")
        user = _unescape_name(attrs["n"])
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        self.user = user
        if authzid and authzid != f"a={attrs['n']}":
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        credential = self._lookup(user, self.mechanism)
        if credential is None:  # a made-up credential: the failure comes at the same step as a wrong password
            self._fake = True
            salt = _hmac(self._digest, _FAKE_SECRET, user.encode())[:16]
            credential = ScramCredential(salt, b"\0", b"\0", MIN_ITERATIONS)
        self._credential = credential
        self._first_bare = bare
        # alphanumeric, as Kafka's ScramFormatter.secureRandomString
        self._nonce = attrs["r"] + secrets.token_hex(16)
        salt_b64 = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt_b64},i={credential.iterations}"
        self._state = "FINAL"
        return self._server_first.encode()

    def _final(self, text: str) -> tuple[bytes, str | None]:
        self._state = "DONE"
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise SaslFailure("Invalid SCRAM client-final message: no proof")
        attrs = _attributes(without_proof)
        # Kafka's ScramSaslServer checks endsWith, and librdkafka 2.0 sends its client nonce
        # in front of the combined one: accept what Kafka accepts
        if not attrs.get("r", "").endswith(self._nonce):
            raise SaslFailure("Invalid SCRAM client-final message: nonce mismatch")
        if attrs.get("c") != "biws":  # base64("n,,"): no channel binding, no authzid
            raise SaslFailure("Invalid SCRAM client-final message: channel binding is not supported")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise SaslFailure("Invalid SCRAM client-final message: proof is not base64") from None
        assert self._credential is not None
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._digest, self._credential.stored_key, auth_message)
        if len(proof) != len(signature) or self._fake:
            raise SaslFailure(f"Authentication failed: Invalid user credentials with SASL mechanism {self.mechanism}")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), self._credential.stored_key):
            raise SaslFailure(f"Authentication failed: Invalid user credentials with SASL mechanism {self.mechanism}")
        server_signature = _hmac(self._digest, self._credential.server_key, auth_message)
        return f"v={base64.b64encode(server_signature).decode()}".encode(), f"User:{self.user}"
