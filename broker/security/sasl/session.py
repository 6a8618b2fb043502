"""One connection's SASL state (KIP-43 / KIP-152), the single owner of its transitions.

    HANDSHAKE --SaslHandshake(enabled mechanism)--> AUTHENTICATE
    HANDSHAKE --SaslHandshake(other mechanism)----> HANDSHAKE   (UNSUPPORTED_SASL_MECHANISM)
    AUTHENTICATE --token accepted, more to come---> AUTHENTICATE
    AUTHENTICATE --token accepted, done----------->  COMPLETE    (principal set)
    AUTHENTICATE --token refused------------------>  FAILED      (the connection is closed)

Before COMPLETE only ApiVersions, SaslHandshake and SaslAuthenticate are served (``allows``).
``raw_tokens``: after a v0 handshake the tokens come as bare size-prefixed frames, not requests.
"""

from __future__ import annotations

from broker.security.sasl.config import SaslListenerConfig
from broker.security.sasl.errors import SaslFailure
from broker.security.sasl.plain import PlainServer
from broker.security.sasl.scram import CredentialLookup, ScramServer
from pyspark_log.wire.api_keys import ApiKey

_BEFORE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class IllegalSaslState(Exception):
    """A SASL request that the current state does not allow (ILLEGAL_SASL_STATE)."""


class SaslSession:
    def __init__(self, config: SaslListenerConfig, scram: CredentialLookup = lambda _user, _mechanism: None) -> None:
        self.config = config
        self._scram = scram
        self.state = "HANDSHAKE"
        self.mechanism: str | None = None
        self.raw_tokens = False
        self.principal: str | None = None
        self._server: PlainServer | ScramServer | None = None

    @property
    def user(self) -> str | None:
        """The user name the client claimed (for logs), once the mechanism has parsed it."""
        return self._server.user if self._server is not None else None

    def allows(self, api_key: int) -> bool:
        return self.state == "COMPLETE" or api_key in _BEFORE_AUTH

    def handshake(self, mechanism: str, *, raw_tokens: bool) -> bool:
        """Whether ``mechanism`` is enabled here (then AUTHENTICATE); IllegalSaslState after it."""
        if self.state != "HANDSHAKE":
            raise IllegalSaslState(f"SaslHandshake in state {self.state}")
        if mechanism not in self.config.mechanisms:
            return False
        self.mechanism = mechanism
        self.raw_tokens = raw_tokens
        self._server = self.config.server(mechanism, self._scram)
        self.state = "AUTHENTICATE"
        return True

    def authenticate(self, token: bytes) -> bytes:
        """The server's answer to one client token; SaslFailure moves to FAILED."""
        if self.state != "AUTHENTICATE" or self._server is None:
            raise IllegalSaslState(f"SaslAuthenticate in state {self.state}")
        try:
            answer, principal = self._server.step(token)
        except SaslFailure:
            self.state = "FAILED"
            raise
        if principal is not None:
            self.principal = principal
            self.state = "COMPLETE"
        return answer
