"""Issue #15 (SASL/SCRAM, RFC 5802 / 7677, KIP-554): users are created with confluent-kafka's
AdminClient (AlterUserScramCredentials: the client salts, the broker records salt, StoredKey and
ServerKey in the metadata), described, and then log in with SCRAM-SHA-256 and SCRAM-SHA-512 from
confluent-kafka, kafka-python, aiokafka, kcat and pylog's client over SASL_PLAINTEXT and SASL_SSL.
Wrong passwords, unknown and deleted users are refused; credentials survive a broker restart."""

from __future__ import annotations

import re
import ssl
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from pyspark_log.embedded import EmbeddedBroker
from tests.integration.compat import (
    aio_consume,
    aio_produce,
    confluent_consume,
    confluent_produce,
    kcat_consume,
    kcat_produce,
    kp_consume,
    kp_produce,
    numbered_records,
    pylog_round_trip,
)
from tests.tls_certs import Certs, make_certs
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

COUNT = 10
PASSWORD = "scram-pw-77b"
CASES = [(p, m) for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")]
IDS = [f"{p.lower()}-{m[-3:]}" for p, m in CASES]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def addresses_of(broker: EmbeddedBroker) -> dict[str, str]:
    ready = re.findall(r"pylog broker ready: .*listeners=(\S+)", broker.output())
    return dict(uri.split("://") for uri in ready[-1].split(","))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[tuple[EmbeddedBroker, dict[str, str]]]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server.both),
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("scram"), overrides=overrides, python=sys.executable) as broker:
        admin = AdminClient({"bootstrap.servers": addresses_of(broker)["PLAINTEXT"]})
        upserts = [
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(mechanism, iterations), PASSWORD.encode())
            for mechanism, iterations in ((ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192))
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            assert future.result(timeout=30) is None
        yield broker, addresses_of(broker)


def librdkafka(protocol: str, mechanism: str, certs: Certs, password: str = PASSWORD, user: str = "alice") -> dict:
    config = {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        config["ssl.ca.location"] = str(certs.ca)
    return config


def python_client(protocol: str, mechanism: str, certs: Certs, *, aio: bool) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "security_protocol": protocol, "sasl_mechanism": mechanism,
        "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD,
    }  # fmt: skip
    if protocol == "SASL_SSL":
        if aio:
            extra["ssl_context"] = ssl.create_default_context(cafile=str(certs.ca))
        else:
            extra["ssl_cafile"] = str(certs.ca)
    return extra


def test_users_are_described_by_mechanism_and_iterations(node: tuple[EmbeddedBroker, dict[str, str]]) -> None:
    addresses = addresses_of(node[0])  # fresh: a test restarts the broker on new ports
    admin = AdminClient({"bootstrap.servers": addresses["PLAINTEXT"]})
    described = admin.describe_user_scram_credentials(["alice"])
    infos = described["alice"].result(timeout=30).scram_credential_infos
    assert sorted((i.mechanism, i.iterations) for i in infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096),
        (ScramMechanism.SCRAM_SHA_512, 8192),
    ]
    with pytest.raises(Exception, match=r"RESOURCE_NOT_FOUND|nonexistent"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=30)


@pytest.mark.parametrize(("protocol", "mechanism"), CASES, ids=IDS)
def test_confluent_kafka(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str, mechanism: str):
    addresses = addresses_of(node[0])  # fresh: a test restarts the broker on new ports
    records = numbered_records("ck", 0, COUNT, value_bytes=70_000)
    topic = f"scram-ck-{protocol.lower()}-{mechanism[-3:]}"
    extra = librdkafka(protocol, mechanism, certs)
    assert len(confluent_produce(addresses[protocol], topic, records, **extra)) == COUNT
    assert [g.value for g in confluent_consume(addresses[protocol], topic, COUNT, **extra)] == [
        r.value for r in records
    ]


@pytest.mark.parametrize(("protocol", "mechanism"), CASES, ids=IDS)
def test_kafka_python(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str, mechanism: str):
    addresses = addresses_of(node[0])  # fresh: a test restarts the broker on new ports
    records = numbered_records("kp", 0, COUNT, value_bytes=70_000)
    topic = f"scram-kp-{protocol.lower()}-{mechanism[-3:]}"
    extra = python_client(protocol, mechanism, certs, aio=False)
    assert len(kp_produce(addresses[protocol], topic, records, **extra)) == COUNT
    assert [g.value for g in kp_consume(addresses[protocol], topic, COUNT, **extra)] == [r.value for r in records]


@pytest.mark.parametrize(("protocol", "mechanism"), CASES, ids=IDS)
def test_aiokafka(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str, mechanism: str):
    addresses = addresses_of(node[0])  # fresh: a test restarts the broker on new ports
    records = numbered_records("aio", 0, COUNT, value_bytes=70_000)
    topic = f"scram-aio-{protocol.lower()}-{mechanism[-3:]}"
    extra = python_client(protocol, mechanism, certs, aio=True)
    assert len(aio_produce(addresses[protocol], topic, records, **extra)) == COUNT
    assert [g.value for g in aio_consume(addresses[protocol], topic, COUNT, **extra)] == [r.value for r in records]


@pytest.mark.parametrize(("protocol", "mechanism"), CASES, ids=IDS)
def test_kcat(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str, mechanism: str):
    addresses = addresses_of(node[0])  # fresh: a test restarts the broker on new ports
    topic = f"scram-kcat-{protocol.lower()}-{mechanism[-3:]}"
    args = [arg for key, value in librdkafka(protocol, mechanism, certs).items() for arg in ("-X", f"{key}={value}")]
    pairs = [(b"k%d" % i, b"v%d" % i * 1000) for i in range(COUNT)]
    kcat_produce(addresses[protocol], topic, pairs, extra=args)
    assert [g.value for g in kcat_consume(addresses[protocol], topic, COUNT, extra=args)] == [v for _, v in pairs]


@pytest.mark.parametrize(("protocol", "mechanism"), CASES, ids=IDS)
def test_pylog_client(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs, protocol: str, mechanism: str):
    addresses = addresses_of(node[0])  # fresh: a test restarts the broker on new ports
    topic = f"scram-pylog-{protocol.lower()}-{mechanism[-3:]}"
    config = {"bootstrap.servers": addresses[protocol], **librdkafka(protocol, mechanism, certs)}
    pylog_round_trip(config, topic, [b"z%d" % i for i in range(COUNT)], what="pylog consumer over SCRAM")


def test_wrong_unknown_and_deleted_users_are_refused_and_credentials_survive_a_restart(
    node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs
) -> None:
    broker = node[0]
    addresses = addresses_of(broker)
    address = addresses["SASL_PLAINTEXT"]
    records = numbered_records("x", 0, 1)
    for user, password in (("alice", "wrong-pw-s1"), ("nobody", "whatever-s2")):
        with pytest.raises(AssertionError):
            confluent_produce(address, "scram-denied", records, **{
                **librdkafka("SASL_PLAINTEXT", "SCRAM-SHA-256", certs, password=password, user=user),
                "message.timeout.ms": 3000})  # fmt: skip
    wait_until(lambda: "user 'nobody' from 127.0.0.1:" in broker.output(), "the failed login logged")
    for secret in ("wrong-pw-s1", "whatever-s2", PASSWORD):
        assert secret not in broker.output()
    admin = AdminClient({"bootstrap.servers": addresses["PLAINTEXT"]})
    bob = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-pw")
    admin.alter_user_scram_credentials([bob])["bob"].result(timeout=30)
    bob_config = librdkafka("SASL_PLAINTEXT", "SCRAM-SHA-256", certs, password="bob-pw", user="bob")
    assert len(confluent_produce(address, "scram-bob", records, **bob_config)) == 1
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])[
        "bob"
    ].result(timeout=30)
    with pytest.raises(AssertionError):
        confluent_produce(address, "scram-bob", records, **{**bob_config, "message.timeout.ms": 3000})
    # the salted credentials are in the metadata: a restarted broker still knows alice
    broker.stop()
    broker.start()
    addresses = addresses_of(broker)
    extra = librdkafka("SASL_SSL", "SCRAM-SHA-512", certs)
    assert len(confluent_produce(addresses["SASL_SSL"], "scram-after-restart", records, **extra)) == 1


def test_pylog_users_cli_mirrors_kafka_configs(node: tuple[EmbeddedBroker, dict[str, str]], certs: Certs) -> None:
    import os
    import subprocess
    from pathlib import Path

    addresses = addresses_of(node[0])  # fresh: a test restarts the broker on new ports
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    base = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", addresses["PLAINTEXT"], "users"]

    def pylog(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=60, env=env, check=False)

    specs = "SCRAM-SHA-256=[iterations=8192,password=carol,pw],SCRAM-SHA-512=[password=carol-512]"
    added = pylog("--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", specs)
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == "Completed updating config for user carol."
    described = pylog("--describe", "--entity-name", "carol")
    assert described.stdout.strip() == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"
    )
    login = librdkafka("SASL_SSL", "SCRAM-SHA-256", certs, password="carol,pw", user="carol")
    assert len(confluent_produce(addresses["SASL_SSL"], "scram-cli", numbered_records("c", 0, 1), **login)) == 1
    deleted = pylog("--alter", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-256")
    assert deleted.returncode == 0, deleted.stderr
    assert "SCRAM-SHA-256" not in pylog("--describe", "--entity-name", "carol").stdout
    missing = pylog("--describe", "--entity-name", "nobody")
    assert missing.returncode == 1
    assert "RESOURCE_NOT_FOUND" in missing.stderr
    bad = pylog("--alter", "--entity-name", "carol", "--add-config", "SCRAM-SHA-1=[password=x]")
    assert bad.returncode == 2
