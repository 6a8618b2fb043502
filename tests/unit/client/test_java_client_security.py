"""The Java client's security settings as Spark's Kafka connector and Databricks pass them
(``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``), read by pylog's
client: Databricks' shaded login module names and single quotes in JAAS values, PEM and PKCS12
stores (a Java 9+ ``JKS`` store type reads PKCS12 files too), and Java's empty
``ssl.endpoint.identification.algorithm``, which turns the host name check off."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyspark_log.client.config import ADMIN, parse
from pyspark_log.client.errors import ConfigError
from pyspark_log.client.security import _jaas_login, client_context
from tests.tls_certs import PKCS12_PASSWORD, Certs, make_certs

pytestmark = pytest.mark.unit

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.mark.parametrize(
    "jaas",
    [
        f'{PLAIN} required username="user" password="p;a ss";',
        f"kafkashaded.{PLAIN} required username='user' password='p;a ss';",
        f"kafkashaded.{SCRAM} required username=\"user\" password='p;a ss';",
        f"{SCRAM} required\n  username='user'\n  password='p;a ss';",
    ],
)
def test_jaas_logins_in_kafka_and_databricks_shapes(jaas: str) -> None:
    assert _jaas_login(jaas) == ("user", "p;a ss")


def test_single_quoted_jaas_values_keep_escaped_quotes() -> None:
    assert _jaas_login(f"{PLAIN} required username='o\\'brien' password='x';") == ("o'brien", "x")


@pytest.mark.parametrize(
    ("jaas", "message"),
    [
        ("com.example.OtherLoginModule required username='u' password='p';", "PlainLoginModule or ScramLoginModule"),
        (f"{PLAIN} required password='p';", "no username"),
        (f"{PLAIN} required username='u' password='p'", "cannot be parsed"),
    ],
)
def test_bad_jaas_values_name_the_option(jaas: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        _jaas_login(jaas)
    assert "sasl.jaas.config" in str(caught.value)
    assert "'p'" not in str(caught.value)


def test_pkcs12_truststore_with_its_password(certs: Certs) -> None:
    ctx = client_context({
        "ssl.truststore.location": str(certs.ca_p12),
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.password": PKCS12_PASSWORD,
    })  # fmt: skip
    assert [dict(c["subject"][-1])["commonName"] for c in ctx.get_ca_certs()] == ["pylog test CA trusted"]


def test_jks_store_type_reads_a_pkcs12_file_as_java_does(certs: Certs) -> None:
    ctx = client_context({
        "ssl.truststore.location": str(certs.ca_p12),
        "ssl.truststore.type": "JKS",
        "ssl.truststore.password": PKCS12_PASSWORD,
    })  # fmt: skip
    assert len(ctx.get_ca_certs()) == 1


def test_a_real_jks_file_is_refused_with_how_to_convert_it(tmp_path: Path) -> None:
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(bytes.fromhex("feedfeed00000002") + b"\x00" * 64)  # JKS magic, not PKCS12
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.location .*keytool -importkeystore"):
        client_context({"ssl.truststore.location": str(jks), "ssl.truststore.type": "JKS"})


def test_wrong_truststore_password_names_the_key(certs: Certs) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.password") as caught:
        client_context({
            "ssl.truststore.location": str(certs.ca_p12),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.password": "wrong-secret",
        })  # fmt: skip
    assert "wrong-secret" not in str(caught.value)


@pytest.mark.parametrize("kind", ["PKCS12", "PEM"])
def test_keystore_gives_the_client_certificate(certs: Certs, kind: str) -> None:
    location = certs.alice_p12 if kind == "PKCS12" else certs.alice.both
    ctx = client_context({
        "ssl.truststore.location": str(certs.ca),
        "ssl.keystore.location": str(location),
        "ssl.keystore.type": kind,
        "ssl.keystore.password": PKCS12_PASSWORD,
    })  # fmt: skip
    assert ctx.get_ca_certs()  # the chain loaded without error; the handshake is tested in test_tls.py


@pytest.mark.parametrize(("value", "checks"), [("https", True), ("HTTPS", True), ("none", False), ("", False)])
def test_endpoint_identification_algorithm(certs: Certs, value: str, checks: bool) -> None:
    config = parse(ADMIN, {"bootstrap.servers": "h:1", "ssl.ca.location": str(certs.ca),
                           "ssl.endpoint.identification.algorithm": value}, "admin")  # fmt: skip
    assert client_context(config).check_hostname is checks
