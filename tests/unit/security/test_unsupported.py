"""Issue #15: a security setting the broker cannot honour stops it at start-up, naming the key."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.security.protocols import ProtocolMapError, listener_protocol, parse_protocol_map

pytestmark = pytest.mark.unit


def load(raw: dict[str, str]) -> BrokerConfig:
    return BrokerConfig.from_mapping({"log.dirs": "/nonexistent-unused", **raw}, warn_unknown=False)


def test_default_map_is_the_identity_on_the_protocol_names() -> None:
    protocol_map = parse_protocol_map("")
    assert listener_protocol("SASL_SSL", protocol_map) == "SASL_SSL"
    assert listener_protocol("plaintext", protocol_map) == "PLAINTEXT"
    with pytest.raises(ProtocolMapError, match="CLIENT"):
        listener_protocol("CLIENT", protocol_map)


def test_map_entries_are_checked() -> None:
    assert parse_protocol_map("client:plaintext, CONTROLLER:SASL_SSL") == {
        "CLIENT": "PLAINTEXT",
        "CONTROLLER": "SASL_SSL",
    }
    with pytest.raises(ProtocolMapError, match="TLS is not one of"):
        parse_protocol_map("CLIENT:TLS")
    with pytest.raises(ProtocolMapError, match="not NAME:PROTOCOL"):
        parse_protocol_map("CLIENT")


def test_sasl_listeners_and_their_keys_are_accepted() -> None:
    config = load(
        {
            "listeners": "SASL_SSL://127.0.0.1:0,CLIENT://127.0.0.1:0",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CLIENT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.client.plain.sasl.jaas.config": "x",
            "listener.name.client.sasl.enabled.mechanisms": "PLAIN",
        }
    )
    assert config.listener_protocols == {"SASL_SSL": "SASL_SSL", "CLIENT": "SASL_PLAINTEXT"}


def test_plaintext_listeners_still_start() -> None:
    config = load(
        {
            "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,SSL:SSL",
            "authorizer.class.name": "",
        }
    )
    assert config.listener_protocols == {"CLIENT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"}


def test_an_unmapped_listener_name_is_refused_as_kafka_does() -> None:
    with pytest.raises(ConfigError, match="listener CLIENT: no security protocol defined"):
        load({"listeners": "CLIENT://127.0.0.1:0"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sasl.kerberos.service.name", "kafka"),
        ("sasl.jaas.config", "org.apache.kafka...ScramLoginModule required;"),
        ("listener.name.sasl_ssl.gssapi.sasl.jaas.config", "com.sun.security.auth.module.Krb5LoginModule required;"),
        ("principal.builder.class", "com.example.Builder"),
    ],
)
def test_each_security_key_is_refused_by_name(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"config {key} cannot be honoured"):
        load({key: value})


def test_every_refused_key_is_named_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        load({"sasl.kerberos.service.name": "kafka", "ssl.provider": "SunJSSE", "authorizer.class.name": "com.x.Y"})
    message = str(caught.value)
    for name in ("sasl.kerberos.service.name", "ssl.provider", "authorizer.class.name"):
        assert name in message


def test_unknown_key_warnings_never_print_a_secret_value(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING")
    BrokerConfig.from_mapping({"log.dirs": "/nonexistent-unused", "password.encoder.secret": "hunter2"})
    assert "password.encoder.secret" in caplog.text
    assert "hunter2" not in caplog.text


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("ssl.engine.factory.class", "custom SSL engine factories"),
        ("ssl.provider", "security providers"),
        ("ssl.keystore.typo", "not a TLS setting this broker knows"),
    ],
)
def test_ssl_keys_that_cannot_be_honoured_are_refused(key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load({key: "RULE:^CN=(.*)$/$1/"})


def test_unusable_principal_mapping_rules_are_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"listener\.name\.client\.ssl\.principal\.mapping\.rules: invalid rule"):
        load({"listener.name.client.ssl.principal.mapping.rules": "DEFAULT/L"})
    with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules: rule pattern"):
        load({"ssl.principal.mapping.rules": "RULE:^CN=(unclosed$/$1/"})
    load({"ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT"})


def test_tls_and_sasl_on_the_inter_broker_and_controller_listeners_are_accepted_in_kraft_mode() -> None:
    """The node's own connections (Raft, registration, replication) speak the protocol of the
    listener they target (broker.security.outbound), so no listener has to stay PLAINTEXT."""
    raw = {
        "process.roles": "broker,controller",
        "listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SASL_SSL",
        "controller.listener.names": "CONTROLLER",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": "x",
    }
    config = load(raw)
    assert config.listener_protocols == {"SSL": "SSL", "CONTROLLER": "SASL_SSL"}
    assert config.inter_broker_listener == "SSL"
    assert config.controller_target == ("CONTROLLER", "SASL_SSL")


@pytest.mark.parametrize(
    "name", ["org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"]
)
def test_kafkas_authorizer_class_names_start_pylogs_authorizer(name: str) -> None:
    config = load({"authorizer.class.name": name, "super.users": "User:admin;User:ANONYMOUS",
                   "allow.everyone.if.no.acl.found": "true"})  # fmt: skip
    assert config.raw["authorizer.class.name"] == name


def test_another_authorizer_class_is_refused_with_the_fix() -> None:
    with pytest.raises(
        ConfigError, match=r"authorizer\.class\.name=com\.example\.Custom cannot be honoured.*StandardAuthorizer"
    ):
        load({"authorizer.class.name": "com.example.Custom"})


def test_allow_everyone_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError, match=r"allow\.everyone\.if\.no\.acl\.found"):
        load(
            {
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "yes",
            }
        )
