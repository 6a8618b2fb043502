"""KIP-368 (``connections.max.reauth.ms``): a login's session lifetime, re-authentication on the same
connection with the same mechanism and principal, and the closing of connections whose session
expired for anything but SaslHandshake / SaslAuthenticate (Kafka's behaviour)."""

from __future__ import annotations

import pytest

from broker.security.sasl.config import SaslConfigError, listener_config
from broker.security.sasl.errors import SaslFailure
from broker.security.sasl.session import IllegalSaslState, SaslSession
from pyspark_log.wire.api_keys import ApiKey

pytestmark = pytest.mark.unit

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";'
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def session(reauth_ms: str, clock: Clock) -> SaslSession:
    raw = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.l.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": reauth_ms,
    }
    return SaslSession(listener_config(raw, "L"), clock_ms=clock)


def login(s: SaslSession, user: str = "alice") -> None:
    assert s.handshake("PLAIN", raw_tokens=False)
    s.authenticate(f"\0{user}\0{user}-secret".encode())


def test_without_reauth_a_login_never_expires_and_a_second_handshake_is_illegal() -> None:
    clock = Clock()
    s = session("0", clock)
    login(s)
    assert s.session_lifetime_ms == 0
    clock.now += 10**9
    assert not s.expired()
    assert s.allows(ApiKey.PRODUCE)
    with pytest.raises(IllegalSaslState):
        s.handshake("PLAIN", raw_tokens=False)


def test_an_expired_session_allows_only_sasl_requests() -> None:
    clock = Clock()
    s = session("3000", clock)
    login(s)
    assert s.session_lifetime_ms == 3000  # what SaslAuthenticate v1+ answers
    clock.now += 2999
    assert s.allows(ApiKey.FETCH)
    clock.now += 1
    assert s.expired()
    for api in (ApiKey.FETCH, ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.API_VERSIONS):
        assert not s.allows(api)  # the dispatcher closes the connection
    assert s.allows(ApiKey.SASL_HANDSHAKE)
    assert s.allows(ApiKey.SASL_AUTHENTICATE)


def test_reauthentication_renews_the_session_and_serves_requests_meanwhile() -> None:
    clock = Clock()
    s = session("3000", clock)
    login(s)
    clock.now += 2700  # librdkafka re-authenticates before the end
    assert s.handshake("PLAIN", raw_tokens=False)
    assert s.allows(ApiKey.PRODUCE)  # still logged in under the old session
    s.authenticate(b"\0alice\0alice-secret")
    assert (s.state, s.principal, s.session_lifetime_ms) == ("COMPLETE", "User:alice", 3000)
    clock.now += 2999
    assert s.allows(ApiKey.PRODUCE)  # the new session runs from the re-authentication
    clock.now += 1
    assert not s.allows(ApiKey.PRODUCE)
    assert s.handshake("PLAIN", raw_tokens=False)  # after expiry, re-authentication still works
    s.authenticate(b"\0alice\0alice-secret")
    assert s.allows(ApiKey.PRODUCE)


def test_reauthentication_may_change_neither_mechanism_nor_principal_nor_use_v0() -> None:
    clock = Clock()
    s = session("3000", clock)
    login(s)
    with pytest.raises(IllegalSaslState, match="mechanism"):
        s.handshake("SCRAM-SHA-256", raw_tokens=False)
    with pytest.raises(IllegalSaslState):
        s.handshake("PLAIN", raw_tokens=True)  # SaslHandshake v0 clients cannot re-authenticate
    assert s.handshake("PLAIN", raw_tokens=False)
    with pytest.raises(SaslFailure, match="Cannot change principals"):
        s.authenticate(b"\0bob\0bob-secret")
    assert s.state == "FAILED"
    assert not s.allows(ApiKey.PRODUCE)


def test_a_wrong_password_on_reauthentication_fails_the_connection() -> None:
    clock = Clock()
    s = session("3000", clock)
    login(s)
    assert s.handshake("PLAIN", raw_tokens=False)
    with pytest.raises(SaslFailure):
        s.authenticate(b"\0alice\0wrong")
    assert not s.allows(ApiKey.PRODUCE)


@pytest.mark.parametrize("value", ["-1", "soon"])
def test_a_bad_reauth_value_is_refused_naming_the_key(value: str) -> None:
    raw = {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "connections.max.reauth.ms": value}
    with pytest.raises(SaslConfigError, match=r"connections\.max\.reauth\.ms"):
        listener_config(raw, "L")
