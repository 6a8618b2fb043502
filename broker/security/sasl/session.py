"""One connection's SASL state (KIP-43 / KIP-152 / KIP-368), the single owner of its transitions.

    HANDSHAKE --SaslHandshake(enabled mechanism)--> AUTHENTICATE
    HANDSHAKE --SaslHandshake(other mechanism)----> HANDSHAKE   (UNSUPPORTED_SASL_MECHANISM)
    AUTHENTICATE --token accepted, more to come---> AUTHENTICATE
    AUTHENTICATE --token accepted, done----------->  COMPLETE    (principal set)
    AUTHENTICATE --token refused------------------>  FAILED      (the connection is closed)
    COMPLETE --SaslHandshake(same mechanism)------>  AUTHENTICATE (re-authentication, KIP-368)

Before COMPLETE only ApiVersions, SaslHandshake and SaslAuthenticate are served (``allows``).
``raw_tokens``: after a v0 handshake the tokens come as bare size-prefixed frames, not requests.

KIP-368 (``connections.max.reauth.ms`` > 0, the listener config's ``reauth_ms``): a completed
login holds for that long (``session_lifetime_ms``, which SaslAuthenticate v1+ tells the client).
A client may re-authenticate on the same connection with a new SaslHandshake of the same
mechanism and SaslAuthenticate (the principal must not change, as Kafka requires); while it does,
its requests are still served under the old login until that expires. Once ``expired``, the
connection may only send SaslHandshake / SaslAuthenticate; anything else closes it, as Kafka does
(which is how clients that cannot re-authenticate, SaslAuthenticate v0, are cut off).
"""

from __future__ import annotations

from collections.abc import Callable

from broker.clock import monotonic_ms
from broker.security.sasl.config import SaslListenerConfig
from broker.security.sasl.errors import SaslFailure
from broker.security.sasl.plain import PlainServer
from broker.security.sasl.scram import CredentialLookup, ScramServer
from pyspark_log.wire.api_keys import ApiKey

_BEFORE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_SASL_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class IllegalSaslState(Exception):
    """A SASL request that the current state does not allow (ILLEGAL_SASL_STATE)."""


class SaslSession:
    def __init__(
        self,
        config: SaslListenerConfig,
        scram: CredentialLookup = lambda _user, _mechanism: None,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.config = config
        self._scram = scram
        self._clock_ms = clock_ms
        self.expires_at_ms: int | None = None  # KIP-368: the end of the current login's session
        self.reauthenticating = False
        self.state = "HANDSHAKE"
        self.mechanism: str | None = None
        self.raw_tokens = False
        self.principal: str | None = None
        self._server: PlainServer | ScramServer | None = None

    @property
    def user(self) -> str | None:
        """The user name the client claimed (for logs), once the mechanism has parsed it."""
        return self._server.user if self._server is not None else None

    @property
    def session_lifetime_ms(self) -> int:
        """What SaslAuthenticate v1+ tells the client after a completed login (0: no expiry)."""
        return self.config.reauth_ms if self.state == "COMPLETE" else 0

    def expired(self) -> bool:
        """The login's session (KIP-368) has ended: only SASL requests may follow."""
        return self.expires_at_ms is not None and self._clock_ms() >= self.expires_at_ms

    def allows(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be served now (else the connection is closed)."""
        if api_key in _SASL_APIS:
            return True
        if self.expired():
            return False
        logged_in = self.state == "COMPLETE" or (self.reauthenticating and self.state == "AUTHENTICATE")
        return logged_in or api_key in _BEFORE_AUTH

    def handshake(self, mechanism: str, *, raw_tokens: bool) -> bool:
        """Whether ``mechanism`` is enabled here (then AUTHENTICATE); IllegalSaslState after it,
        except for a KIP-368 re-authentication (v1+, the same mechanism) once logged in."""
        if self.state == "COMPLETE" and self.config.reauth_ms > 0 and not raw_tokens:
            if mechanism != self.mechanism:
                raise IllegalSaslState(
                    f"re-authentication must use the mechanism of the login ({self.mechanism}), not {mechanism}"
                )
            self.reauthenticating = True
        elif self.state != "HANDSHAKE":
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
            if self.reauthenticating and principal != self.principal:
                self.state = "FAILED"
                raise SaslFailure(
                    f"Cannot change principals during re-authentication from {self.principal}: {principal}"
                )
            self.principal = principal
            self.state = "COMPLETE"
            self.reauthenticating = False
            reauth_ms = self.config.reauth_ms
            self.expires_at_ms = self._clock_ms() + reauth_ms if reauth_ms > 0 else None
        return answer
