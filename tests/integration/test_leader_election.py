"""Leadership back to the preferred replicas after a restart, and unclean elections on demand,
on real clusters (Kafka documentation §4.7 "Replication").

§4.7 "Replica Management": "we also try to balance leadership so that each node is the leader
for a proportional share of its partitions". A SIGKILLed broker's leaderships move to other ISR
members; once it is back in the ISR, leadership returns to it — by the active controller's
imbalance check (``auto.leader.rebalance.enable``), or by ``pylog leader-election --election-type
PREFERRED`` — while a confluent-kafka producer with acks=all keeps writing without an error.
§4.7 "Unclean leader election: What if they all die?": ``--election-type UNCLEAN`` brings back a
partition whose ISR is gone with the first live replica.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.cli import main
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import wait_for

NODES = (1, 2, 3)
OVERRIDES = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "4000",
    "leader.imbalance.check.interval.seconds": "2",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


class Writer:
    """An idempotent acks=all producer writing to every partition of ``topic`` on its own thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.topic, self.partitions = topic, partitions
        self.acked = 0
        self.failed: list[KafkaError] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)

    def _delivered(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.failed.append(err)
        else:
            self.acked += 1

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            if len(self.producer) < 100:
                value = str(sent).encode()
                self.producer.produce(self.topic, value=value, partition=sent % self.partitions,
                                      on_delivery=self._delivered)  # fmt: skip
                sent += 1
            self.producer.poll(0.005)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(120)


def preferred_leaders(cluster: EmbeddedCluster, topic: str, via: int) -> bool:
    parts = cluster.partitions(topic, via=via)
    return bool(parts) and all(p.leader == p.replicas[0] for p in parts.values())


def bounce_leader_of_partition_0(cluster: EmbeddedCluster, topic: str) -> int:
    """SIGKILL the leader of partition 0, wait for another leader, restart it, wait until it is
    back in every ISR; returns its id."""
    victim = wait_for(lambda: cluster.partitions(topic).get(0), "the topic in the metadata").leader
    survivor = next(n for n in NODES if n != victim)
    cluster.kill(victim)
    wait_for(lambda: cluster.partitions(topic, via=survivor)[0].leader not in (-1, victim), "a new leader")
    cluster.restart(victim)
    wait_for(
        lambda: all(victim in p.isr for p in cluster.partitions(topic, via=survivor).values()),
        "the restarted broker back in every ISR",
    )
    return victim


def create_topic(cluster: EmbeddedCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_for(lambda: len(cluster.partitions(topic)) == 3, "the topic in the metadata")
    assert preferred_leaders(cluster, topic, NODES[0])  # placement rotates: each node prefers one


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator:
    started: list[EmbeddedCluster] = []

    def make(name: str, **overrides: str) -> EmbeddedCluster:
        c = EmbeddedCluster(tmp_path / name, brokers=NODES, combined=True, overrides={**OVERRIDES, **overrides})
        started.append(c)
        c.start()
        return c

    try:
        yield make
    finally:
        for c in started:
            c.close()


def test_auto_rebalance_returns_leadership_to_the_preferred_replicas(cluster_factory):
    cluster = cluster_factory("auto")
    topic = f"balance-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic)
    with Writer(cluster.bootstrap(), topic, 3) as writer:
        wait_for(lambda: writer.acked > 200, "the first acknowledged records")
        victim = bounce_leader_of_partition_0(cluster, topic)
        wait_for(lambda: preferred_leaders(cluster, topic, victim), "leadership back on the preferred replicas")
        acked_at_rebalance = writer.acked
        wait_for(lambda: writer.acked > acked_at_rebalance + 200, "records acknowledged after the rebalance")
    assert writer.failed == []


def test_leader_election_command_elects_preferred_leaders_when_auto_rebalance_is_off(cluster_factory, capsys):
    cluster = cluster_factory("manual", **{"auto.leader.rebalance.enable": "false"})
    topic = f"manual-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic)
    with Writer(cluster.bootstrap(), topic, 3) as writer:
        wait_for(lambda: writer.acked > 200, "the first acknowledged records")
        victim = bounce_leader_of_partition_0(cluster, topic)
        assert cluster.partitions(topic, via=victim)[0].leader != victim  # nothing moves it back by itself

        argv = ["leader-election", "--bootstrap-server", cluster.bootstrap(), "--election-type", "preferred"]
        assert main([*argv, "--all-topic-partitions"]) == 0
        done = f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"
        assert done in capsys.readouterr().out
        for node in NODES:
            wait_for(lambda node=node: preferred_leaders(cluster, topic, node), f"node {node}: preferred leaders")

        assert main([*argv, "--topic", topic, "--partition", "0"]) == 0
        assert capsys.readouterr().out == f"Valid replica already elected for partitions {topic}-0\n"
        acked_after = writer.acked
        wait_for(lambda: writer.acked > acked_after + 200, "records acknowledged after the election")
    assert writer.failed == []


def test_unclean_election_on_demand_brings_back_a_partition_whose_isr_is_gone(tmp_path, capsys):
    """Broker 5 falls out of the ISR, then broker 4 (the last ISR member) dies; broker 5 returns.
    With ``unclean.leader.election.enable=false`` the partition stays offline — until an admin
    asks for an unclean election."""
    overrides = {k: v for k, v in OVERRIDES.items() if k != "leader.imbalance.check.interval.seconds"}
    cluster = EmbeddedCluster(tmp_path / "unclean", brokers=(4, 5), overrides=overrides)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic("offline", 1, replica_assignment=[[4, 5]])])["offline"].result(60)
        wait_for(lambda: cluster.partitions("offline").get(0), "the topic")
        cluster.kill(5)
        producer = Producer({"bootstrap.servers": cluster.address(4), "acks": "1"})
        producer.produce("offline", value=b"only-on-4", partition=0)
        assert producer.flush(60) == 0
        wait_for(lambda: cluster.partitions("offline", via=4)[0].isr == (4,), "broker 5 out of the ISR")
        cluster.kill(4)
        cluster.restart(5)
        wait_for(lambda: cluster.partitions("offline", via=5)[0].leader == -1, "the partition offline")

        argv = ["leader-election", "--bootstrap-server", cluster.address(5), "--topic", "offline", "--partition", "0"]
        assert main([*argv, "--election-type", "PREFERRED"]) == 1
        out, err = capsys.readouterr()
        assert "Error completing leader election (PREFERRED) for partition: offline-0: " in out
        assert "(PREFERRED_LEADER_NOT_AVAILABLE)" in out
        assert err == "pylog: 1 replica(s) could not be elected\n"

        assert main([*argv, "--election-type", "UNCLEAN"]) == 0
        assert capsys.readouterr().out == "Successfully completed leader election (UNCLEAN) for partitions offline-0\n"
        elected = wait_for(lambda: cluster.partitions("offline", via=5)[0], "the partition")
        assert (elected.leader, elected.isr) == (5, (5,))
    finally:
        cluster.close()


def test_a_single_node_broker_has_nothing_to_elect(tmp_path, capsys):
    with EmbeddedBroker(tmp_path / "single", python=sys.executable) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("solo", 2, 1)])["solo"].result(60)
        argv = ["leader-election", "--bootstrap-server", broker.bootstrap_servers, "--election-type", "preferred"]
        assert main([*argv, "--topic", "solo", "--partition", "1"]) == 0
        assert capsys.readouterr().out == "Valid replica already elected for partitions solo-1\n"
        assert main([*argv, "--all-topic-partitions"]) == 0
        assert capsys.readouterr().out == ""
        assert main([*argv, "--topic", "solo", "--partition", "9"]) == 1
        assert "(UNKNOWN_TOPIC_OR_PARTITION)" in capsys.readouterr().out

        # librdkafka's Admin electLeaders speaks the same ElectLeaders
        wanted = [TopicPartition("solo", 0), TopicPartition("nope", 0)]
        results = admin.elect_leaders(ElectionType.PREFERRED, wanted).result(30)
        codes = {(tp.topic, tp.partition): err.code() for tp, err in results.items()}
        assert codes == {("solo", 0): KafkaError.ELECTION_NOT_NEEDED, ("nope", 0): KafkaError.UNKNOWN_TOPIC_OR_PART}
