"""Issue #15 (inter-node security): which listener and protocol a node dials other nodes with, the
login it takes from Kafka's per-listener JAAS value, and the TLS client context of that listener;
every bad setting is refused naming its key, never its value."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.security.outbound import (
    CONTROLLER_MECHANISM_KEY,
    INTER_BROKER_MECHANISM_KEY,
    OutboundConfigError,
    SaslLogin,
    outbound_security,
)
from tests.tls_certs import make_certs

pytestmark = pytest.mark.unit

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s3cret";'


def load(raw: dict[str, str]) -> BrokerConfig:
    return BrokerConfig.from_mapping({"log.dirs": "/nonexistent-unused", **raw})


def test_plain_login_comes_from_the_listeners_jaas_username_and_password() -> None:
    raw = {
        CONTROLLER_MECHANISM_KEY: "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    security = outbound_security(raw, "CONTROLLER", "SASL_PLAINTEXT", CONTROLLER_MECHANISM_KEY)
    assert security.tls is None
    assert security.sasl == SaslLogin("PLAIN", "admin", "admin-secret")
    assert "admin-secret" not in repr(security)


def test_scram_login_uses_the_scram_mechanisms_jaas_key() -> None:
    raw = {
        INTER_BROKER_MECHANISM_KEY: "scram-sha-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    }
    security = outbound_security(raw, "INTERNAL", "SASL_PLAINTEXT", INTER_BROKER_MECHANISM_KEY)
    assert security.sasl == SaslLogin("SCRAM-SHA-512", "broker", "s3cret")


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({}, INTER_BROKER_MECHANISM_KEY),  # Kafka's default GSSAPI is not spoken
        ({INTER_BROKER_MECHANISM_KEY: "GSSAPI"}, INTER_BROKER_MECHANISM_KEY),
        ({INTER_BROKER_MECHANISM_KEY: "PLAIN"}, "listener.name.internal.plain.sasl.jaas.config"),
        (
            {INTER_BROKER_MECHANISM_KEY: "PLAIN", "listener.name.internal.plain.sasl.jaas.config": SCRAM_JAAS},
            "listener.name.internal.plain.sasl.jaas.config",
        ),
        (
            {
                INTER_BROKER_MECHANISM_KEY: "PLAIN",
                "listener.name.internal.plain.sasl.jaas.config": (
                    'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="hunter2";'
                ),
            },
            "username",
        ),
        (
            {INTER_BROKER_MECHANISM_KEY: "PLAIN", "listener.name.internal.plain.sasl.jaas.config": 'broken "hunter2'},
            "listener.name.internal.plain.sasl.jaas.config",
        ),
    ],
)
def test_unusable_logins_are_refused_naming_the_key_never_the_value(raw: dict[str, str], named: str) -> None:
    with pytest.raises(OutboundConfigError, match=named) as caught:
        outbound_security(raw, "INTERNAL", "SASL_SSL", INTER_BROKER_MECHANISM_KEY)
    assert "hunter2" not in str(caught.value)


def test_tls_client_context_verifies_the_peer_with_the_listeners_truststore(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    raw = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server.both),
        "listener.name.internal.ssl.truststore.type": "PEM",
        "listener.name.internal.ssl.truststore.location": str(certs.ca),
    }
    security = outbound_security(raw, "INTERNAL", "SSL", INTER_BROKER_MECHANISM_KEY)
    assert security.sasl is None
    assert security.tls is not None
    assert security.tls.verify_mode == ssl.CERT_REQUIRED
    assert security.tls.check_hostname  # ssl.endpoint.identification.algorithm=https, Kafka's default
    off = outbound_security(
        {**raw, "ssl.endpoint.identification.algorithm": ""}, "INTERNAL", "SSL", INTER_BROKER_MECHANISM_KEY
    )
    assert off.tls is not None
    assert not off.tls.check_hostname
    with pytest.raises(OutboundConfigError, match=r"ssl\.endpoint\.identification\.algorithm"):
        outbound_security(
            {**raw, "ssl.endpoint.identification.algorithm": "ldap"}, "INTERNAL", "SSL", INTER_BROKER_MECHANISM_KEY
        )
    with pytest.raises(OutboundConfigError, match=r"ssl\.truststore\.location"):
        outbound_security(
            {**raw, "listener.name.internal.ssl.truststore.location": str(tmp_path / "missing.pem")},
            "INTERNAL", "SSL", INTER_BROKER_MECHANISM_KEY,
        )  # fmt: skip


def test_security_inter_broker_protocol_names_the_listener_called_after_it() -> None:
    config = load(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        }
    )
    assert config.inter_broker_listener == "SASL_SSL"
    with pytest.raises(ConfigError, match=r"security\.inter\.broker\.protocol=SSL needs a listener named SSL"):
        load({"listeners": "PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol": "SSL"})


def test_controller_target_is_the_first_controller_listener_or_the_single_listener() -> None:
    combined = {
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "node.id": "1",
    }
    assert load(combined).controller_target == ("CONTROLLER", "SSL")
    broker_only = {**combined, "process.roles": "broker", "node.id": "4", "listeners": "PLAINTEXT://127.0.0.1:0"}
    assert load(broker_only).controller_target == ("CONTROLLER", "SSL")  # mapped, as Kafka requires
    single = {"process.roles": "broker,controller", "listeners": "SSL://127.0.0.1:0", "controller.quorum.voters": ""}
    assert load(single).controller_target == ("SSL", "SSL")  # single-listener mode: the voters' one listener
