"""Replicated partitions on three combined KRaft nodes of Apache Kafka 4.1.1 and of pylog: the
errors a client sees from a follower, and acks=all against ``min.insync.replicas`` once a
follower is gone (SIGKILL; the controller fences it after ``broker.session.timeout.ms`` and the
ISR shrinks to two).

Observed on both, compared as error names: Produce / ListOffsets / Fetch (v12, with a rack id,
KIP-392) sent to a follower; acks=all to topics with ``min.insync.replicas`` 3 and 2 and acks=1,
before and after the follower's loss. A difference must be a row of the table "Replicated
partitions" in docs/compatibility.md. Both clusters are started for this module only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.apache_kafka import ApacheKafkaCluster, KafkaUnavailable, kafka_libs
from tests.differential.documented import compare, table
from tests.differential.scenarios import create_ready_topic, error_name, fetch, list_offset, poll, produce, small_batch

HEADING = "Replicated partitions"
NODES = (1, 2, 3)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka is not available: {exc}")
    root = tmp_path_factory.mktemp("replicated")
    with (
        ApacheKafkaCluster(root / "kafka", brokers=NODES) as kafka,
        EmbeddedCluster(root / "pylog", combined=True, brokers=NODES) as pylog,
    ):
        yield {"kafka": kafka, "pylog": pylog}


def produce_error(address: str, topic: str, acks: int) -> str:
    return error_name(produce(address, topic, small_batch(), acks=acks).error_code)


def scenario(cluster: Any) -> dict[str, str]:
    address = cluster.address(NODES[0])
    strict, lenient = "rf3-min-isr-3", "rf3-min-isr-2"
    for topic, min_isr in ((strict, "3"), (lenient, "2")):
        create_ready_topic(address, topic, replication_factor=3, configs={"min.insync.replicas": min_isr})
        poll(f"full ISR of {topic}", lambda t=topic: cluster.partitions(t)[0].isr, lambda isr: len(isr) == 3)
    leader = cluster.partitions(strict)[0].leader
    follower = next(n for n in NODES if n != leader)
    at_leader, at_follower = cluster.address(leader), cluster.address(follower)
    seen = {
        "follower_produce": produce_error(at_follower, strict, -1),
        "follower_list_offsets": error_name(list_offset(at_follower, strict, -1).error_code),
        "follower_fetch": error_name(fetch(at_follower, strict, 0).error_code),
        "full_isr_acks_all": produce_error(at_leader, strict, -1),
    }
    lost = next(n for n in NODES if n not in (leader,) and cluster.partitions(lenient)[0].leader != n)
    cluster.kill(lost)
    for topic in (strict, lenient):
        poll(
            f"ISR of {topic} without node {lost}",
            lambda t=topic: cluster.partitions(t, via=leader)[0].isr,
            lambda isr: lost not in isr,
            deadline_s=120,
        )
    lenient_leader = cluster.address(cluster.partitions(lenient, via=leader)[0].leader)
    seen |= {
        "shrunk_isr_min_3_acks_all": produce_error(at_leader, strict, -1),
        "shrunk_isr_min_3_acks_1": produce_error(at_leader, strict, 1),
        "shrunk_isr_min_2_acks_all": produce_error(lenient_leader, lenient, -1),
    }
    return seen


@pytest.fixture(scope="module")
def observed(clusters: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {name: scenario(cluster) for name, cluster in clusters.items()}


ASPECTS = ("follower_produce", "follower_list_offsets", "follower_fetch", "full_isr_acks_all",
           "shrunk_isr_min_3_acks_all", "shrunk_isr_min_3_acks_1", "shrunk_isr_min_2_acks_all")  # fmt: skip


@pytest.mark.parametrize("aspect", ASPECTS)
def test_same_errors_on_replicated_partitions(observed: dict[str, dict[str, str]], aspect: str) -> None:
    kafka, pylog = observed["kafka"][aspect], observed["pylog"][aspect]
    differs = {(aspect, kafka, pylog)} if kafka != pylog else set()
    documented = {tuple(row) for row in table(HEADING, 3) if row[0] == aspect}
    message = compare(HEADING, differs, documented)
    assert not message, message
