"""Issue #15 ("A Spark query reads and writes exactly once over SASL_SSL with SCRAM and
least-privilege ACLs"): the broker runs pylog's authorizer; the Spark user ``spark`` logs in with
SCRAM-SHA-512 over SASL_SSL and holds only

* READ on the input topic (the source's ListOffsets / Fetch; DESCRIBE is implied),
* WRITE and READ on the output topic (the rows; READ for the batch mark the sink commits with
  TxnOffsetCommit into the output topic's partition 0),
* WRITE on the transactional ids with the query's prefix and READ on the groups with it
  (PREFIXED ACLs: one transactional id and one mark group per task, ``<prefix>-<task>``).

The streaming query (Trigger.AvailableNow) copies every input record exactly once; run again
on the same checkpoint it adds nothing. Without the transactional-id ACL the query fails with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED instead of writing. The ACLs are made with pylog's admin
client on the PLAINTEXT listener, whose ``User:ANONYMOUS`` is a super user (Kafka's practice)."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.client.acl_admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pyspark_log.embedded import EmbeddedBroker
from spark_tests.helpers import Kafka, read, stream, values_of, wait_until
from tests.tls_certs import make_certs

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("stop_queries")]

PASSWORD = "spark-acl-secret"
PREFIX = "spark-etl"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Any) -> Iterator[EmbeddedBroker]:
    """Overrides the tier's broker: PLAINTEXT first (the helpers' and the admin's), SASL_SSL for Spark."""
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server.both),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("acl-broker"), overrides=overrides, python=sys.executable) as b:
        yield b


@pytest.fixture(scope="module")
def secure(broker: EmbeddedBroker, kafka: Kafka, certs: Any) -> tuple[str, dict[str, str]]:
    ready = re.findall(r"pylog broker ready: .*listeners=(\S+)", broker.output())
    addresses = dict(uri.split("://") for uri in ready[-1].split(","))
    assert kafka.admin.alter_user_scram_credentials([("spark", "SCRAM-SHA-512", PASSWORD, 4096)]) == {"spark": None}
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="spark" password="{PASSWORD}";'
    options = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas,
        "kafka.ssl.truststore.location": str(certs.ca),
        "kafka.ssl.truststore.type": "PEM",
    }
    return addresses["SASL_SSL"], options


def allow(rt: ResourceType, name: str, op: AclOperation, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(rt, name, pattern, "User:spark", "*", op, AclPermissionType.ALLOW)


def least_privilege(source: str, sink: str) -> list[AclBinding]:
    return [
        allow(ResourceType.TOPIC, source, AclOperation.READ),
        allow(ResourceType.TOPIC, sink, AclOperation.WRITE),
        allow(ResourceType.TOPIC, sink, AclOperation.READ),
        allow(ResourceType.TRANSACTIONAL_ID, PREFIX + "-", AclOperation.WRITE, PatternType.PREFIXED),
        allow(ResourceType.GROUP, PREFIX + "-", AclOperation.READ, PatternType.PREFIXED),
    ]


def copy_once(spark: Any, servers: str, options: dict[str, str], source: str, sink: str, chk: Path) -> Any:
    df = stream(spark, servers, subscribe=source, startingOffsets="earliest", **options).selectExpr("key", "value")
    writer = (
        df.writeStream.format("pylog").option("bootstrap.servers", servers).option("topic", sink)
        .option("transactionalIdPrefix", PREFIX).option("checkpointLocation", str(chk))
    )  # fmt: skip
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    try:
        finished = query.awaitTermination(300)
    except Exception:  # a failed query raises here; the test reads query.exception()
        return query
    assert finished, "the AvailableNow query did not finish"
    return query


def settled(spark: Any, kafka: Kafka, topic: str, expected: list[str]) -> None:
    """Wait until a read_committed reader sees exactly ``expected`` (the coordinator writes the
    COMMIT markers just after EndTxn returns, as Kafka does)."""
    seen: list[list[str]] = []

    def check() -> bool:
        seen.append(values_of(read(spark, kafka.servers, subscribe=topic, isolationLevel="read_committed")))
        return seen[-1] == expected

    try:
        wait_until(check, 60, f"readers of {topic} to see {len(expected)} records")
    except AssertionError:
        assert seen[-1] == expected  # shows the difference
        raise


def test_a_streaming_copy_is_exactly_once_with_least_privilege_acls(
    spark: Any, kafka: Kafka, secure: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    servers, options = secure
    source, sink = kafka.create(f"in-{uuid.uuid4().hex[:6]}", 2), kafka.create(f"out-{uuid.uuid4().hex[:6]}", 2)
    expected = kafka.produce_spread(source, 2, 40)
    bindings = least_privilege(source, sink)
    kafka.admin.create_acls(bindings)
    assert set(kafka.admin.describe_acls(AclBindingFilter(principal="User:spark"))) == set(bindings)

    query = copy_once(spark, servers, options, source, sink, tmp_path / "chk")
    assert query.exception() is None
    settled(spark, kafka, sink, sorted(expected))

    kafka.produce_spread(source, 2, 10, prefix="w")
    again = copy_once(spark, servers, options, source, sink, tmp_path / "chk")  # same checkpoint: only new rows
    assert again.exception() is None
    settled(spark, kafka, sink, sorted(expected + [f"w{i}" for i in range(10)]))


def test_without_the_transactional_id_acl_the_query_fails_with_its_error(
    spark: Any, kafka: Kafka, secure: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    servers, options = secure
    source, sink = kafka.create(f"in-{uuid.uuid4().hex[:6]}"), kafka.create(f"out-{uuid.uuid4().hex[:6]}")
    kafka.produce(source, ["x"])
    kafka.admin.create_acls(
        [b for b in least_privilege(source, sink) if b.resource_type != ResourceType.TRANSACTIONAL_ID]
    )
    kafka.admin.delete_acls([AclBindingFilter(ResourceType.TRANSACTIONAL_ID, principal="User:spark")])
    query = copy_once(spark, servers, options, source, sink, tmp_path / "chk")
    assert query.exception() is not None
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(query.exception())
    assert values_of(read(spark, kafka.servers, subscribe=sink, isolationLevel="read_uncommitted")) == []
