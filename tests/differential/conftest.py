"""Differential fixtures: one Apache Kafka 4.1.1 node and one pylog node for the whole tier.

Both are single combined KRaft nodes (``process.roles=broker,controller``) on loopback with the
same cluster-level settings (``ApacheKafkaCluster``'s test defaults, given to pylog as
overrides), so a scenario run against ``brokers.kafka`` and ``brokers.pylog`` differs only by the
broker implementation. Tests create topics with unique names, so one pair serves every module
(two JVM/Python start-ups for the tier, not two per module). Kafka's jars must be in the cache
(``./dev refs``); without them the tier is skipped with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pyspark_log.embedded import EmbeddedBroker
from tests.apache_kafka import ApacheKafkaCluster, KafkaUnavailable, kafka_libs

# Given to both: what ApacheKafkaCluster sets on a one-node cluster, and a quicker log cleaner.
SHARED_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # KIP-932: Kafka cannot create __share_group_state with its default replication factor 3 on one node
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # the cleaner looks for dirty logs every second instead of 15 (test_compaction waits for it)
    "log.cleaner.backoff.ms": "1000",
}


@dataclass(frozen=True)
class Brokers:
    """Bootstrap addresses of the two brokers under comparison (one node each)."""

    kafka: str
    pylog: str

    def items(self) -> list[tuple[str, str]]:
        return [("kafka", self.kafka), ("pylog", self.pylog)]


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka is not available: {exc}")
    root = tmp_path_factory.mktemp("differential")
    pylog = EmbeddedBroker(root / "pylog", kraft=True, overrides=SHARED_OVERRIDES, python=sys.executable)
    with ApacheKafkaCluster(root / "kafka", brokers=(1,), overrides=SHARED_OVERRIDES) as kafka:
        try:
            pylog.start()
            yield Brokers(kafka=kafka.bootstrap(), pylog=pylog.bootstrap_servers)
        finally:
            pylog.close()


@pytest.fixture(params=["kafka", "pylog"])
def broker_impl(request: pytest.FixtureRequest, brokers: Brokers) -> tuple[str, str]:
    """(name, bootstrap) of each implementation in turn, for a scenario checked on both."""
    name = request.param
    return name, getattr(brokers, name)
