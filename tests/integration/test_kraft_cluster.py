"""A KRaft cluster of real processes on loopback: three controllers (``process.roles=controller``,
the KIP-595 voters) and two brokers (``process.roles=broker``, observers of the metadata log).

KIP-595 and the issue's "Done when": topics created on one broker are visible on the
other with the same partitions and leaders; clients produce and consume across both brokers; a
SIGKILLed quorum leader is replaced and the metadata stays identical on both brokers; a graceful
leader shutdown hands over at once and nothing is lost; a broker of another cluster is refused.

The tests share one cluster and run in file order (the leader tests restart what they stop).
Metadata is read with raw requests to one broker at a time, so each answer is that broker's own.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from pyspark_log.embedded import BrokerStartError, EmbeddedBroker
from pyspark_log.embedded_cluster import CLUSTER_ID, QUORUM_TIMEOUTS, EmbeddedCluster, request
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.wire import ApiKey
from tests.integration.cluster_harness import WAIT_S, wait_for

CONTROLLER_IDS = (1, 2, 3)
BROKER_IDS = (4, 5)


@dataclass(frozen=True)
class View:
    """What one broker's Metadata response says about the cluster."""

    cluster_id: str
    brokers: dict[int, int]  # node id -> port
    topics: dict[str, tuple[str, dict[int, int]]]  # name -> (topic id, {partition: leader})


def metadata(address: str) -> View:
    body = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    response = request(address, ApiKey.METADATA, 12, body)
    return View(
        response.cluster_id,
        {b.node_id: b.port for b in response.brokers},
        {
            t.name: (str(t.topic_id), {p.partition_index: p.leader_id for p in t.partitions})
            for t in response.topics
            if not t.name.startswith("__")
        },
    )


def quorum_leader(address: str) -> int:
    """The leader id DescribeQuorum reports (-1: none known, or the node could not answer)."""
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    response = request(address, ApiKey.DESCRIBE_QUORUM, 0, body)
    if response.error_code:
        return -1
    part = response.topics[0].partitions[0]
    return -1 if part.error_code else part.leader_id


class Cluster(EmbeddedCluster):
    """Three controllers and two brokers (``EmbeddedCluster``), with this file's views of them."""

    def __init__(self, root: Path) -> None:
        super().__init__(
            root, controllers=CONTROLLER_IDS, brokers=BROKER_IDS, overrides={"broker.session.timeout.ms": "30000"}
        )

    @property
    def controllers(self) -> dict[int, EmbeddedBroker]:
        return {n: self.nodes[n] for n in CONTROLLER_IDS}

    @property
    def brokers(self) -> dict[int, EmbeddedBroker]:
        return {n: self.nodes[n] for n in BROKER_IDS}

    @property
    def addresses(self) -> list[str]:
        return [b.bootstrap_servers for b in self.brokers.values()]

    def leader(self, among: tuple[int, ...] = CONTROLLER_IDS, excluding: int = -1) -> int:
        def elected() -> int:
            for n in among:
                if n != excluding and self.controllers[n].running:
                    leader = quorum_leader(self.controller_address(n))
                    if leader >= 0 and leader != excluding:
                        return leader
            return 0

        return int(wait_for(elected, "an elected quorum leader"))

    def agreed_view(self, topics: tuple[str, ...] = ()) -> View:
        """Wait until both brokers answer the same metadata, with both brokers and ``topics``."""

        def same() -> View | None:
            a, b = (metadata(addr) for addr in self.addresses)
            complete = set(a.brokers) == set(BROKER_IDS) and all(t in a.topics for t in topics)
            return a if a == b and complete else None

        return wait_for(same, f"both brokers to agree on the metadata of {topics}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("kraft")) as c:
        yield c


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(address: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(timeout=60)


def test_topic_created_on_one_broker_is_visible_on_the_other_with_the_same_leaders(cluster: Cluster):
    a, b = cluster.addresses
    name = unique("visible")
    create_topic(a, name, 4)
    view = cluster.agreed_view((name,))
    assert view.cluster_id == CLUSTER_ID
    assert view.brokers == {n: cluster.brokers[n].port for n in BROKER_IDS}
    _, leaders = view.topics[name]
    assert sorted(leaders) == [0, 1, 2, 3]
    assert set(leaders.values()) == set(BROKER_IDS)  # round-robin over both brokers
    admin_b = AdminClient({"bootstrap.servers": b})
    admin_b.create_partitions([NewPartitions(name, 6)])[name].result(timeout=60)
    assert len(cluster.agreed_view((name,)).topics[name][1]) == 6


def test_explicit_replica_assignments_are_honoured_or_refused(cluster: Cluster):
    """CreateTopics/CreatePartitions with replica lists (forwarded from either broker) put each
    partition's leader where the list says; an unknown broker id is INVALID_REPLICA_ASSIGNMENT."""
    a, b = cluster.addresses
    name = unique("assigned")
    admin_a, admin_b = AdminClient({"bootstrap.servers": a}), AdminClient({"bootstrap.servers": b})
    wanted = [[5], [5], [4]]
    admin_a.create_topics([NewTopic(name, len(wanted), replica_assignment=wanted)], operation_timeout=30)[name].result(
        timeout=60
    )
    assert cluster.agreed_view((name,)).topics[name][1] == {0: 5, 1: 5, 2: 4}
    more = NewPartitions(name, 5, replica_assignment=[[4], [5]])
    admin_b.create_partitions([more], operation_timeout=30)[name].result(timeout=60)
    assert cluster.agreed_view((name,)).topics[name][1] == {0: 5, 1: 5, 2: 4, 3: 4, 4: 5}

    refused = unique("refused")
    future = admin_b.create_topics([NewTopic(refused, 2, replica_assignment=[[4], [9]])], operation_timeout=30)[refused]
    with pytest.raises(Exception) as info:
        future.result(timeout=60)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "includes broker 9, but no such broker is registered" in info.value.args[0].str()  # Kafka's message
    future = admin_a.create_partitions([NewPartitions(name, 7, replica_assignment=[[4]])], operation_timeout=30)[name]
    with pytest.raises(Exception) as info:
        future.result(timeout=60)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert len(cluster.agreed_view((name,)).topics[name][1]) == 5


def test_produce_to_a_partition_led_elsewhere_is_not_leader_or_follower(cluster: Cluster):
    name = unique("not-leader")
    create_topic(cluster.addresses[0], name, 2)
    _, leaders = cluster.agreed_view((name,)).topics[name]
    partition, leader = next(iter(leaders.items()))
    other = next(n for n in BROKER_IDS if n != leader)
    batch = encode_batch([ProducerRecord(None, b"x", int(time.time() * 1000))])
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 10000,
        "topic_data": [{"name": name, "partition_data": [{"index": partition, "records": batch}]}],
    }
    answer = request(cluster.brokers[other].bootstrap_servers, ApiKey.PRODUCE, 9, body)
    assert answer.responses[0].partition_responses[0].error_code == KafkaError.NOT_LEADER_FOR_PARTITION
    answer = request(cluster.brokers[leader].bootstrap_servers, ApiKey.PRODUCE, 9, body)
    assert answer.responses[0].partition_responses[0].error_code == 0


def test_auto_creation_by_metadata_goes_through_the_quorum(cluster: Cluster):
    name = unique("auto")
    body = {"topics": [{"name": name}], "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    answer = request(cluster.addresses[1], ApiKey.METADATA, 12, body)
    assert answer.topics[0].error_code == 0
    assert answer.topics[0].partitions
    view = cluster.agreed_view((name,))
    assert view.topics[name][0] == str(answer.topics[0].topic_id)


def test_clients_produce_and_consume_across_both_brokers(cluster: Cluster):
    a, b = cluster.addresses
    name = unique("across")
    create_topic(b, name, 4)
    cluster.agreed_view((name,))
    producer = Producer({"bootstrap.servers": a, "enable.idempotence": False})
    for i in range(200):
        producer.produce(name, key=b"k%d" % i, value=b"v%d" % i, partition=i % 4)
    assert producer.flush(60) == 0
    consumer = Consumer(
        {"bootstrap.servers": b, "group.id": unique("g"), "auto.offset.reset": "earliest", "enable.auto.commit": True}
    )
    consumer.subscribe([name])
    got: list[bytes] = []
    try:
        wait_for(
            lambda: _poll_into(consumer, got) and len(set(got)) == 200,
            "all 200 records through a consumer group spanning both brokers",
        )
    finally:
        consumer.close()
    assert set(got) == {b"v%d" % i for i in range(200)}


def _read_partitions(address: str, name: str, partitions: int, isolation: str, want: set[bytes]) -> set[bytes]:
    """Every value a consumer with ``isolation`` reads from the start of ``name`` once it has
    seen ``want`` (failing after the wait), plus whatever else it saw on the way."""
    consumer = Consumer(
        {"bootstrap.servers": address, "group.id": unique("r"), "isolation.level": isolation,
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in range(partitions)])
    got: list[bytes] = []
    try:
        wait_for(lambda: _poll_into(consumer, got) and want <= set(got), f"{isolation} reads of {name}")
        for _ in range(6):  # anything else already readable arrives in these polls
            _poll_into(consumer, got)
    finally:
        consumer.close()
    return set(got)


def test_transactions_span_partitions_led_by_both_brokers(cluster: Cluster):
    """The transaction coordinator (on whichever broker leads the transactional id's
    __transaction_state partition) writes COMMIT/ABORT markers to its own partitions and sends
    WriteTxnMarkers to the other broker for its partitions; read_committed readers of either
    broker see committed transactions whole and aborted ones never. Offsets sent to the
    transaction (to a group whose coordinator may be the other broker) count only once committed."""
    a, b = cluster.addresses
    name = unique("txn-span")
    admin = AdminClient({"bootstrap.servers": a})
    admin.create_topics([NewTopic(name, 4, replica_assignment=[[4], [5], [4], [5]])])[name].result(timeout=60)
    assert cluster.agreed_view((name,)).topics[name][1] == {0: 4, 1: 5, 2: 4, 3: 5}
    producer = Producer({"bootstrap.servers": b, "transactional.id": unique("span"), "linger.ms": 5})
    producer.init_transactions(60)
    group = unique("txn-group")
    member = Consumer({"bootstrap.servers": a, "group.id": group, "enable.auto.commit": False})
    committed: set[bytes] = set()
    aborted: set[bytes] = set()
    offsets_seen = []
    for round_no, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        values = {b"%s-%d-%d" % (b"c" if commit else b"a", round_no, i) for i in range(20)}
        for i, value in enumerate(sorted(values)):
            producer.produce(name, value=value, partition=i % 4)
        positions = [TopicPartition(name, p, 10 * (round_no + 1) + p) for p in range(4)]
        producer.send_offsets_to_transaction(positions, member.consumer_group_metadata(), 60)
        if commit:
            producer.commit_transaction(60)
            committed |= values
        else:
            assert producer.flush(60) == 0  # written first: abort_transaction drops what is still queued
            producer.abort_transaction(60)
            aborted |= values
        stored = member.committed([TopicPartition(name, p) for p in range(4)], timeout=60)
        offsets_seen.append([tp.offset for tp in stored])
    member.close()
    assert offsets_seen == [[10, 11, 12, 13], [10, 11, 12, 13], [30, 31, 32, 33]]
    for address in (a, b):
        assert _read_partitions(address, name, 4, "read_committed", committed) == committed
    assert _read_partitions(a, name, 4, "read_uncommitted", committed | aborted) == committed | aborted


def _check_continuity(cluster: Cluster, before: View, created_on: str) -> None:
    """Metadata identical on both brokers, nothing lost, and new topics still work."""
    name = unique("after")
    create_topic(created_on, name, 2)
    after = cluster.agreed_view((name, *before.topics))
    for topic, described in before.topics.items():
        assert after.topics[topic] == described
    assert after.brokers == before.brokers


def test_sigkill_of_the_quorum_leader_elects_a_new_one_and_metadata_stays_identical(cluster: Cluster):
    name = unique("pre-kill")
    create_topic(cluster.addresses[0], name, 3)
    before = cluster.agreed_view((name,))
    old = cluster.leader()
    cluster.controllers[old].kill()
    new = cluster.leader(excluding=old)
    assert new != old
    _check_continuity(cluster, before, cluster.addresses[1])
    cluster.controllers[old].start()  # rejoins as a follower; later tests have three voters again
    cluster.agreed_view()


def test_graceful_shutdown_of_the_leader_hands_over_and_metadata_continues(cluster: Cluster):
    name = unique("pre-stop")
    create_topic(cluster.addresses[1], name, 2)
    before = cluster.agreed_view((name,))
    old = cluster.leader()
    assert cluster.controllers[old].stop() == 0
    cluster.leader(excluding=old)
    _check_continuity(cluster, before, cluster.addresses[0])
    cluster.controllers[old].start()
    cluster.agreed_view()


def test_an_operation_forwarded_to_a_paused_leader_is_retried_at_its_successor(cluster: Cluster):
    """A broker forwards CreateTopics to the active controller; when that controller is paused
    (SIGSTOP) mid-operation the broker does not wait out its request timeout (30 s, the
    client's operation timeout here): once the quorum elects a successor the broker sends it
    there, and the topic is created. Before, the client got REQUEST_TIMED_OUT."""
    old = cluster.leader()
    cluster.pause(old)
    try:
        name = unique("while-paused")
        create_topic(cluster.addresses[0], name, 2)
        assert cluster.leader(excluding=old) != old
        cluster.agreed_view((name,))
    finally:
        cluster.resume(old)
    cluster.agreed_view()


def test_broker_with_another_cluster_id_is_refused(cluster: Cluster, tmp_path: Path):
    stranger = EmbeddedBroker(
        tmp_path / "stranger",
        overrides={
            "process.roles": "broker",
            "node.id": "9",
            "controller.quorum.voters": cluster.voters,
            "cluster.id": "b3RoZXItY2x1c3Rlci1pZA",
            **QUORUM_TIMEOUTS,
        },
        python=sys.executable,
        start_timeout_s=WAIT_S,
    )
    with pytest.raises(BrokerStartError) as info:
        stranger.start()
    assert stranger.stop() not in (0, None)
    assert "INCONSISTENT_CLUSTER_ID" in str(info.value) or "cluster id" in str(info.value).lower()
    assert 9 not in metadata(cluster.addresses[0]).brokers


@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "kill-9"])
def test_single_node_broker_controller_keeps_its_metadata_across_restarts(tmp_path: Path, crash: bool):
    """``process.roles=broker,controller`` with no voters configured: a one-voter quorum of itself
    (the demo's setup). Topics, their ids and configs, records and committed offsets survive a
    clean restart and a SIGKILL, because the metadata log is replayed on start-up."""
    with EmbeddedBroker(tmp_path / "node", kraft=True, python=sys.executable) as node:
        name, group = unique("single"), unique("g")
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        topic = NewTopic(name, 3, 1, config={"retention.ms": "3600000"})
        admin.create_topics([topic], operation_timeout=30)[name].result(timeout=60)
        producer = Producer({"bootstrap.servers": node.bootstrap_servers, "enable.idempotence": False})
        for i in range(30):
            producer.produce(name, value=b"v%d" % i, partition=i % 3)
        assert producer.flush(60) == 0
        consumer = Consumer(
            {"bootstrap.servers": node.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([name])
        got: list[bytes] = []
        try:
            wait_for(lambda: _poll_into(consumer, got) and len(got) >= 30, "30 records before the restart")
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        before = metadata(node.bootstrap_servers)
        if crash:
            node.kill()
            node.start()
        else:
            node.restart()
        after = wait_for(
            lambda: (view := metadata(node.bootstrap_servers)).topics.get(name) == before.topics[name] and view,
            "the topic back after the restart",
        )
        assert after.brokers == before.brokers
        configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
        described = next(iter(configs.values())).result(timeout=60)
        assert described["retention.ms"].value == "3600000"
        consumer = Consumer({"bootstrap.servers": node.bootstrap_servers, "group.id": group})
        try:
            committed = consumer.committed([TopicPartition(name, p) for p in range(3)], timeout=30)
        finally:
            consumer.close()
        assert sum(tp.offset for tp in committed) == 30


def _poll_into(consumer: Consumer, sink: list[bytes]) -> bool:
    msg = consumer.poll(0.5)
    if msg is not None and msg.error() is None:
        sink.append(msg.value())
    return True
