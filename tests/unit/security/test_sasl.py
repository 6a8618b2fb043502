"""Issue #15 (SASL): JAAS values as Kafka writes them, the PLAIN server (RFC 4616, Kafka's
PlainSaslServer rules), per-listener SASL settings and the per-connection state machine."""

from __future__ import annotations

import pytest

from broker.security.sasl.config import SaslConfigError, listener_config
from broker.security.sasl.errors import SaslFailure
from broker.security.sasl.plain import PlainServer
from broker.security.sasl.session import IllegalSaslState, SaslSession
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.jaas import JaasError, parse_jaas, plain_users

pytestmark = pytest.mark.unit

KAFKA_DOCS_EXAMPLE = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required \\n"
    '    username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
).replace("\\n", "\n")


def test_jaas_as_kafka_documents_it() -> None:
    entry = parse_jaas(KAFKA_DOCS_EXAMPLE)
    assert entry.flag == "required"
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}
    quoted = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="a \\"q\\" b;c";')
    assert plain_users(quoted) == {"bob": 'a "q" b;c'}


@pytest.mark.parametrize(
    "text",
    [
        "PlainLoginModule",
        'org.apache.kafka.common.security.plain.PlainLoginModule mandatory user_a="b";',
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b"',
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b"; user_c="d";',
    ],
)
def test_bad_jaas_is_refused_without_echoing_values(text: str) -> None:
    with pytest.raises(JaasError) as caught:
        parse_jaas(text)
    assert '"b"' not in str(caught.value)


def test_plain_accepts_the_right_password_only() -> None:
    assert PlainServer({"alice": "pw"}).step(b"\0alice\0pw") == (b"", "User:alice")
    assert PlainServer({"alice": "pw"}).step(b"alice\0alice\0pw")[1] == "User:alice"  # authzid = user is fine
    for token, message in (
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0bob\0pw", "Invalid username or password"),
        (b"bob\0alice\0pw", "authorization id that is different"),
        (b"\0\0pw", "username not specified"),
        (b"alice-pw", "expected 3 tokens"),
        (b"\0\xff\0pw", "not UTF-8"),
    ):
        with pytest.raises(SaslFailure, match=message) as caught:
            PlainServer({"alice": "pw"}).step(token)
        assert "wrong" not in str(caught.value)


def test_listener_config_reads_kafka_keys_and_names_what_is_missing() -> None:
    raw = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": KAFKA_DOCS_EXAMPLE,
    }
    assert listener_config(raw, "SASL_SSL").plain_users == {"admin": "admin-secret", "alice": "alice-secret"}
    with pytest.raises(SaslConfigError, match=r"listener\.name\.client\.plain\.sasl\.jaas\.config is required"):
        listener_config(raw, "CLIENT")
    with pytest.raises(SaslConfigError, match=r"set sasl\.enabled\.mechanisms"):
        listener_config({}, "SASL_SSL")
    with pytest.raises(SaslConfigError, match="GSSAPI cannot be served"):
        listener_config({"listener.name.x.sasl.enabled.mechanisms": "GSSAPI"}, "X")


def test_session_transitions() -> None:
    config = listener_config(
        {"sasl.enabled.mechanisms": "PLAIN", "listener.name.l.plain.sasl.jaas.config": KAFKA_DOCS_EXAMPLE}, "L"
    )
    session = SaslSession(config)
    assert session.allows(ApiKey.API_VERSIONS)
    assert not session.allows(ApiKey.METADATA)
    with pytest.raises(IllegalSaslState):
        session.authenticate(b"\0alice\0alice-secret")  # before the handshake
    assert not session.handshake("SCRAM-SHA-256", raw_tokens=False)  # UNSUPPORTED_SASL_MECHANISM, retry allowed
    assert session.handshake("PLAIN", raw_tokens=False)
    with pytest.raises(IllegalSaslState):
        session.handshake("PLAIN", raw_tokens=False)
    assert session.authenticate(b"\0alice\0alice-secret") == b""
    assert (session.state, session.principal) == ("COMPLETE", "User:alice")
    assert session.allows(ApiKey.METADATA)
    failed = SaslSession(config)
    failed.handshake("PLAIN", raw_tokens=False)
    with pytest.raises(SaslFailure):
        failed.authenticate(b"\0alice\0nope")
    assert failed.state == "FAILED"
    assert failed.user == "alice"
    assert not failed.allows(ApiKey.METADATA)
