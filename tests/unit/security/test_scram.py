"""Issue #15 (SCRAM): the server against RFC 7677's SCRAM-SHA-256 example, our client against our
server for both mechanisms, and AlterUserScramCredentials' validation (Kafka's rules, KIP-554)."""

from __future__ import annotations

import base64

import pytest

from broker.controller.scram_credentials import Deletion, Upsertion, alter_scram
from broker.metadata.cluster_state import ClusterState
from broker.metadata.replay import apply_record
from broker.security.sasl.errors import SaslFailure
from broker.security.sasl.scram import ScramCredential, ScramServer, credential_from_salted_password, salted_password
from pyspark_log.client.security import ScramClient
from pyspark_log.wire.errors import ErrorCode

pytestmark = pytest.mark.unit

# RFC 7677 section 3
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
CLIENT_FINAL = b"c=biws,r=" + SERVER_NONCE.encode() + b",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return credential_from_salted_password(
        "SCRAM-SHA-256", SALT, salted_password("SCRAM-SHA-256", "pencil", SALT, 4096), 4096
    )


def test_rfc7677_example_is_accepted() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda user, mech: rfc_credential() if user == "user" else None)
    first = server.step(CLIENT_FIRST)[0].decode()
    assert first.startswith("r=rOprNGfwEbeRWgbNEkqO")
    assert first.endswith(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    # white box: the RFC's server nonce instead of our random one, so its proof applies
    server._nonce = SERVER_NONCE
    server._server_first = f"r={SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert server.step(CLIENT_FINAL) == (SERVER_FINAL, "User:user")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_our_client_and_server_agree_and_wrong_passwords_fail(mechanism: str) -> None:
    salt = b"0123456789abcdef"
    stored = credential_from_salted_password(mechanism, salt, salted_password(mechanism, "s3cret", salt, 4096), 4096)
    lookup = {("alice", mechanism): stored}.get

    def login(password: str, user: str = "alice") -> str | None:
        server = ScramServer(mechanism, lambda u, m: lookup((u, m)))
        client = ScramClient(mechanism, user, password)
        final = client.final(server.step(client.first())[0])
        answer, principal = server.step(final)
        client.verify(answer)
        return principal

    assert login("s3cret") == "User:alice"
    for password, user in (("wrong", "alice"), ("s3cret", "nobody")):
        with pytest.raises(SaslFailure, match="Invalid user credentials") as caught:
            login(password, user)
        assert password not in str(caught.value)


def test_malformed_first_messages_fail_cleanly() -> None:
    for token in (b"", b"p=tls-unique,,n=a,r=x", b"n,,n=a", b"n,,n=a,r=x,ext=1", b"n,,n=,r=x", b"\xff"):
        with pytest.raises(SaslFailure):
            ScramServer("SCRAM-SHA-256", lambda u, m: None).step(token)


def test_alter_scram_validates_per_user_as_kafka_does() -> None:
    ok = Upsertion("alice", 1, 4096, b"salt", b"x" * 32)
    bad = [
        Upsertion("bob", 3, 4096, b"s", b"p"),
        Upsertion("carol", 1, 100, b"s", b"p"),
        Upsertion("", 1, 4096, b"s", b"p"),
    ]
    records, results = alter_scram(ClusterState(), [Deletion("ghost", 2)], [ok, *bad])
    assert results == {
        "ghost": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "alice": (ErrorCode.NONE, None),
        "bob": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism type 3"),
        "carol": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Iterations must be between 4096 and 16384"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
    }
    state = ClusterState()
    for record in records:
        state = apply_record(state, 0, record)
    assert set(state.scram) == {("alice", "SCRAM-SHA-256")}
    assert "x" * 8 not in repr(records)  # the salted password itself is not recorded
    _, twice = alter_scram(state, [Deletion("alice", 1)], [ok])
    assert twice["alice"][0] == ErrorCode.DUPLICATE_RESOURCE
    removed, _ = alter_scram(state, [Deletion("alice", 1)], [])
    for record in removed:
        state = apply_record(state, 1, record)
    assert state.scram == {}
