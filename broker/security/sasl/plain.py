"""SASL/PLAIN server (RFC 4616), as Kafka's ``PlainSaslServer``.

The one client message is ``[authzid] NUL authcid NUL passwd`` (UTF-8). The authorization id
must be empty or equal the user name (Kafka refuses impersonation); the password is compared in
constant time. A failure raises ``SaslFailure`` whose message never holds the password.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from broker.security.sasl.errors import SaslFailure


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.user: str | None = None  # the user name the client gave, once parsed (for logs)
        self.complete = False

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        """``(server token, principal)``: PLAIN is one step, so the principal is always given."""
        if self.complete:
            raise SaslFailure("PLAIN authentication is already complete")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens separated by NUL")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        self.user = user
        if authzid and authzid != user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self._users.get(user)
        # compare against something even for an unknown user, so timing does not tell users apart
        ok = hmac.compare_digest((expected or "\x00unknown").encode(), password.encode())
        if expected is None or not ok:
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.complete = True
        return b"", f"User:{user}"
