"""Issue #15 (Spark pass-through): a Spark batch job writes to and reads from a SASL_SSL listener
with SCRAM-SHA-512, configured the way Spark's Kafka connector is (``kafka.security.protocol``,
``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``); the
executors log in themselves. A wrong password fails the query instead of reading nothing."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_log.client import AdminClient
from pyspark_log.embedded import EmbeddedBroker
from spark_tests.helpers import read, values_of
from tests.tls_certs import PKCS12_PASSWORD, Certs, make_certs

pytestmark = [pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Certs]]:
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server.both),
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("secure"), overrides=overrides, python=sys.executable) as broker:
        ready = re.search(r"pylog broker ready: .*listeners=(\S+)", broker.output())
        assert ready is not None
        addresses = dict(uri.split("://") for uri in ready.group(1).split(","))
        admin = AdminClient({"bootstrap.servers": addresses["PLAINTEXT"]})
        try:
            assert admin.alter_user_scram_credentials([("spark", "SCRAM-SHA-512", "spark-secret", 4096)]) == {
                "spark": None
            }
        finally:
            admin.close()
        jaas = (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="spark" password="spark-secret";'
        )
        options = {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": jaas,
            "kafka.ssl.truststore.location": str(certs.ca),
            "kafka.ssl.truststore.type": "PEM",
        }
        yield addresses["SASL_SSL"], options, certs


def test_spark_writes_and_reads_over_sasl_ssl_with_scram(spark: Any, secure: tuple[str, dict[str, str], Certs]) -> None:
    servers, options, _ = secure
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    df = spark.createDataFrame([(f"v{i}",) for i in range(20)], ["value"])
    writer = df.write.format("pylog").mode("append").option("bootstrap.servers", servers).option("topic", topic)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()
    assert values_of(read(spark, servers, subscribe=topic, **options)) == sorted(f"v{i}" for i in range(20))
    wrong = {**options, "kafka.sasl.jaas.config": options["kafka.sasl.jaas.config"].replace("spark-secret", "nope")}
    with pytest.raises(Exception, match=r"SASL_AUTHENTICATION_FAILED|Authentication failed"):
        read(spark, servers, subscribe=topic, **wrong).collect()


def test_databricks_shapes_of_the_same_login(spark: Any, secure: tuple[str, dict[str, str], Certs]) -> None:
    """What a Databricks notebook passes: the shaded login module (``kafkashaded.``) with single
    quotes, a PKCS12 truststore with its password, and Java's empty
    ``ssl.endpoint.identification.algorithm`` (no host name check)."""
    servers, _, certs = secure
    databricks = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "kafkashaded.org.apache.kafka.common.security.scram.ScramLoginModule required "
            "username='spark' password='spark-secret';"
        ),
        "kafka.ssl.truststore.location": str(certs.ca_p12),
        "kafka.ssl.truststore.type": "PKCS12",
        "kafka.ssl.truststore.password": PKCS12_PASSWORD,
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    topic = f"databricks-{uuid.uuid4().hex[:8]}"
    df = spark.createDataFrame([(f"d{i}",) for i in range(10)], ["value"])
    writer = df.write.format("pylog").mode("append").option("bootstrap.servers", servers).option("topic", topic)
    for key, value in databricks.items():
        writer = writer.option(key, value)
    writer.save()
    assert values_of(read(spark, servers, subscribe=topic, **databricks)) == sorted(f"d{i}" for i in range(10))
