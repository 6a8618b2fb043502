"""Keyed records land on the same partitions as librdkafka's ``murmur2_random`` (and the Java
client's default partitioner): confluent-kafka and pylog produce the same keys, partitions match."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from pyspark_log.client import AdminClient, NewTopic, Producer, partition_for_key
from pyspark_log.embedded import EmbeddedBroker

KEYS = [f"key-{i}" for i in range(150)] + ["", "a", "abc", "ümlaut", "x" * 500, "21", "foobar"]


def confluent_partitions(bootstrap: str, topic: str, keys: list[str], extra: dict[str, object]) -> dict[str, int]:
    out: dict[str, int] = {}
    errors: list[object] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            out[msg.key().decode()] = msg.partition()  # type: ignore[attr-defined]

    p = ck.Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5, **extra})
    for k in keys:
        p.produce(topic, value=b"v", key=k.encode(), on_delivery=delivered)
    assert p.flush(30) == 0
    assert not errors
    return out


@pytest.mark.parametrize("partitions", [1, 3, 7, 16])
def test_keyed_partitions_equal_confluent_kafka(broker: EmbeddedBroker, topic_name: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as a:
        a.create_topics([NewTopic(topic_name, partitions, 1)])
    theirs = confluent_partitions(broker.bootstrap_servers, topic_name, KEYS, {})
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5}) as p:
        futs = {k: p.send(topic_name, b"v", key=k) for k in KEYS}
        ours = {k: f.result(timeout=30).partition for k, f in futs.items()}
    assert ours == theirs
    assert ours == {k: partition_for_key(k.encode(), partitions) for k in KEYS}


def test_librdkafka_mock_cluster_agrees_without_a_pylog_broker() -> None:
    """librdkafka's in-process mock cluster (auto-created topics have 4 partitions)."""
    out: dict[str, int] = {}
    p = ck.Producer({"test.mock.num.brokers": 1, "partitioner": "murmur2_random", "linger.ms": 0, "log_level": 0})
    for k in KEYS:
        p.produce(
            "mock-topic",
            value=b"v",
            key=k.encode(),
            on_delivery=lambda e, m: out.__setitem__(m.key().decode(), m.partition()),
        )
    assert p.flush(30) == 0
    n = len(p.list_topics("mock-topic", timeout=10).topics["mock-topic"].partitions)
    assert out == {k: partition_for_key(k.encode(), n) for k in KEYS}
