"""KIP-932 share-partition state persisted by the share coordinator, on a cluster of three
``broker,controller`` nodes SIGKILLed for real.

KIP-932 "Share-partition state persistence": the share-partition leader writes the start offset,
the in-flight records' states and delivery counts to the share coordinator of the share-partition
(the leader of its ``__share_group_state`` partition, FindCoordinator key type 2) with
WriteShareGroupState; a new leader reads it back with ReadShareGroupState. A librdkafka share
consumer (confluent-kafka's ``ShareConsumer``, explicit acknowledgement) accepts part of a batch
and holds the rest when it is SIGKILLed; then the share coordinator's leader and the partition's
leader are SIGKILLed and restarted one after the other. Afterwards the accepted records are never
delivered again, the held ones are, with their delivery count kept (2), and one released then is
archived by ``group.share.delivery.count.limit`` = 2; ``pylog share-groups describe`` and Kafka
4.1.1's ``kafka-share-groups --describe`` show the start offset of before the failures.
``reset-offsets`` (InitializeShareGroupState, a new state epoch) and ``delete``
(DeleteShareGroupState) change what the share coordinator answers to ReadShareGroupStateSummary.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.wire import ApiKey
from tests.integration.cluster_harness import wait_for
from tests.waiting import Deadline

from .groups_helpers import produce, unique

NODES = (1, 2, 3)
STATE_TOPIC = "__share_group_state"
OVERRIDES = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "share.coordinator.snapshot.update.records.per.snapshot": "2",  # ShareUpdates and ShareSnapshots both
    "group.share.delivery.count.limit": "2",  # Kafka's lowest
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.heartbeat.interval.ms": "250",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.session.timeout.ms": "3000",
}
DEADLINE_S = 120
UNKNOWN_TOPIC_OR_PARTITION = 3

CHILD = """
import sys
import time
from confluent_kafka import AcknowledgeType, ShareConsumer
bootstrap, group, topic = sys.argv[1:4]
c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
c.subscribe([topic])
while True:
    got = [m for m in c.poll(0.5) or [] if m.error() is None]
    if got:
        break
got.sort(key=lambda m: m.offset())
accepted = got[: (len(got) + 1) // 2]
for m in accepted:
    c.acknowledge(m, AcknowledgeType.ACCEPT)
c.commit_sync()
print("ACCEPTED", " ".join(f"{m.offset()}:{m.value().decode()}" for m in accepted), flush=True)
print("HELD", " ".join(f"{m.offset()}:{m.value().decode()}" for m in got[len(accepted):]), flush=True)
print("DONE", flush=True)
while True:  # holds the rest, never acknowledges them (until SIGKILL)
    time.sleep(0.2)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    import confluent_kafka

    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer")
    with EmbeddedCluster(
        tmp_path_factory.mktemp("share-state"), brokers=NODES, combined=True, overrides=OVERRIDES
    ) as c:
        yield c


def pylog(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", bootstrap, "share-groups", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def described_start(cluster: EmbeddedCluster, group: str, topic: str) -> int | None:
    """START-OFFSET of partition 0 in ``pylog share-groups describe`` (None: not shown)."""
    done = pylog(cluster.bootstrap(), "describe", "--group", group)
    for line in done.stdout.splitlines()[1:]:
        cols = line.split()
        if cols[:3] == [group, topic, "0"] and cols[-1].lstrip("-").isdigit():
            return int(cols[-1])
    return None


def kafka_shows_start(cluster: EmbeddedCluster, group: str, topic: str, start: int) -> None:
    """Kafka 4.1.1's ``kafka-share-groups --describe`` prints ``start`` for partition 0 (skipped
    without the Kafka reference jars)."""
    from tests.apache_kafka import KafkaUnavailable, kafka_libs, kafka_tool

    try:
        kafka_libs()
    except KafkaUnavailable:
        return
    shown = kafka_tool("kafka-share-groups", "--bootstrap-server", cluster.bootstrap(), "--describe", "--group", group)
    rows = [line.split() for line in shown.stdout.strip().splitlines()[1:]]
    assert [group, topic, "0", str(start)] in rows, shown.stdout + shown.stderr


def topic_id(cluster: EmbeddedCluster, topic: str) -> str:
    """Kafka's text form of the topic id (URL-safe base64, unpadded), from a Metadata answer."""
    response = request(cluster.address(running(cluster)[0]), ApiKey.METADATA, 12, {"topics": [{"name": topic}]})
    return base64.urlsafe_b64encode(response.topics[0].topic_id.bytes).decode().rstrip("=")


def running(cluster: EmbeddedCluster) -> list[int]:
    return [n for n in NODES if cluster.nodes[n].running]


def share_coordinator(cluster: EmbeddedCluster, key: str) -> int | None:
    """FindCoordinator key type 2 (SHARE) for ``group:topicId:partition``: the node, or None."""
    body = {"key_type": 2, "coordinator_keys": [key]}
    answer = request(cluster.address(running(cluster)[0]), ApiKey.FIND_COORDINATOR, 4, body).coordinators[0]
    return answer.node_id if answer.error_code == 0 and answer.node_id in running(cluster) else None


def group_coordinator(cluster: EmbeddedCluster, group: str) -> int | None:
    body = {"key_type": 0, "coordinator_keys": [group]}
    answer = request(cluster.address(running(cluster)[0]), ApiKey.FIND_COORDINATOR, 4, body).coordinators[0]
    return answer.node_id if answer.error_code == 0 and answer.node_id in running(cluster) else None


def share_group_epoch(cluster: EmbeddedCluster, group: str) -> tuple[Any, ...] | None:
    """ShareGroupDescribe (77) at the group coordinator: (state, group epoch, (member id, member
    epoch) of each member), None until it answers."""
    node = group_coordinator(cluster, group)
    if node is None:
        return None
    body = {"group_ids": [group], "include_authorized_operations": False}
    described = request(cluster.address(node), ApiKey.SHARE_GROUP_DESCRIBE, 1, body).groups[0]
    if described.error_code != 0:
        return None
    members = tuple(sorted((m.member_id, m.member_epoch) for m in described.members))
    return described.group_state, described.group_epoch, members


def state_summary(cluster: EmbeddedCluster, group: str, topic: str) -> Any:
    """ReadShareGroupStateSummary (87) of partition 0, asked of its share coordinator."""
    response = request(cluster.address(running(cluster)[0]), ApiKey.METADATA, 12, {"topics": [{"name": topic}]})
    tid = response.topics[0].topic_id
    key = f"{group}:{base64.urlsafe_b64encode(tid.bytes).decode().rstrip('=')}:0"
    node = wait_for(lambda: share_coordinator(cluster, key), "the share coordinator")
    body = {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": -1}]}]}
    return request(cluster.address(node), ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, body).results[0].partitions[0]


def kill_and_restart(cluster: EmbeddedCluster, victim: int, topics: list[tuple[str, int]]) -> None:
    """SIGKILL ``victim``, wait until each of ``topics``' partitions it led has another leader,
    restart it, and wait until it is back in their ISRs (so the next kill keeps min.insync)."""
    led = [(t, p) for t, p in topics if cluster.partitions(t).get(p) and cluster.partitions(t)[p].leader == victim]
    cluster.kill(victim)
    for t, p in led:
        wait_for(
            lambda t=t, p=p: (v := cluster.partitions(t).get(p)) is not None and v.leader not in (victim, -1),
            f"{t}-{p} led by another node than {victim}",
            DEADLINE_S,
        )
    cluster.restart(victim)
    for t, p in topics:
        wait_for(
            lambda t=t, p=p: (v := cluster.partitions(t).get(p)) is not None and set(v.isr) == set(NODES),
            f"{victim} back in the ISR of {t}-{p}",
            DEADLINE_S,
        )


def until(consumer: Any, received: list[tuple[int, bytes, int]], done: Callable[[], bool], decide: Any) -> None:
    deadline = Deadline(DEADLINE_S)
    while not done():
        assert not deadline.expired(), received
        messages = [m for m in consumer.poll(0.5) or [] if m.error() is None]
        for m in messages:
            received.append((m.offset(), m.value(), m.delivery_count()))
            consumer.acknowledge(m, decide(m))
        if messages:
            consumer.commit_sync()


def test_state_survives_share_coordinator_and_leader_failures(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = unique("state"), unique("g")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_for(lambda: (v := cluster.partitions(topic).get(0)) is not None and len(v.isr) == 3, "the topic's ISR")
    values = produce(cluster.bootstrap(), topic, 10)
    reset = pylog(
        cluster.bootstrap(), "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"
    )
    assert reset.returncode == 0, reset.stdout + reset.stderr

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    errors = (tmp_path / "child.err").open("w")
    child = subprocess.Popen(
        [sys.executable, str(script), cluster.bootstrap(), group, topic],
        stdout=subprocess.PIPE, stderr=errors, text=True, bufsize=1,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        lines: dict[str, list[tuple[int, bytes]]] = {}
        deadline = Deadline(DEADLINE_S)
        while "DONE" not in lines:
            assert not deadline.expired(), lines
            line = child.stdout.readline()
            assert line, f"the child ended: {(tmp_path / 'child.err').read_text()}"
            word, *pairs = line.split()
            lines[word] = [(int(o), v.encode()) for o, v in (pair.split(":", 1) for pair in pairs)]
        os.kill(child.pid, signal.SIGKILL)  # its acquired records stay acquired (no session close)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        errors.close()
    accepted, held = {v for _, v in lines["ACCEPTED"]}, {v for _, v in lines["HELD"]}
    assert accepted, lines
    assert held, lines
    start = min(o for o, _ in lines["HELD"])
    wait_for(lambda: described_start(cluster, group, topic) == start, f"describe showing start offset {start}")
    kafka_shows_start(cluster, group, topic, start)

    key = f"{group}:{topic_id(cluster, topic)}:0"
    coordinator = wait_for(lambda: share_coordinator(cluster, key), "the share coordinator")
    watched = [(topic, 0), *((STATE_TOPIC, p) for p in range(3))]
    kill_and_restart(cluster, coordinator, watched)  # the share coordinator's leader
    kill_and_restart(cluster, cluster.partitions(topic)[0].leader, watched)  # the share-partition's leader

    shown_after = wait_for(lambda: (d := described_start(cluster, group, topic)) is not None and (d,), "describe")
    assert shown_after == (start,)  # the same start offset after the failures
    kafka_shows_start(cluster, group, topic, start)

    doomed = sorted(held)[0]  # released once more: delivery count 2 = the limit, so archived
    consumer = ShareConsumer({
        "bootstrap.servers": cluster.bootstrap(), "group.id": group, "share.acknowledgement.mode": "explicit",
    })  # fmt: skip
    consumer.subscribe([topic])
    received: list[tuple[int, bytes, int]] = []

    def decide(m: Any) -> Any:
        return AcknowledgeType.RELEASE if m.value() == doomed else AcknowledgeType.ACCEPT

    try:
        until(consumer, received, lambda: held <= {v for _, v, _ in received}, decide)
        assert {d for _, v, d in received if v in held} == {2}, received  # the delivery count was kept
        # the group coordinator fails while the consumer is a member: the group's records in
        # __consumer_offsets bring back the member with its epochs (no rejoin), and the
        # share-partitions the group has state for (which delete needs)
        members = wait_for(lambda: (d := share_group_epoch(cluster, group)) and d[0] == "Stable" and d, "a member")
        kill_and_restart(cluster, wait_for(lambda: group_coordinator(cluster, group), "the group coordinator"),
                         [*(("__consumer_offsets", p) for p in range(3)), *watched])  # fmt: skip
        wait_for(lambda: share_group_epoch(cluster, group) == members, f"{members} after the failover")
        marker = produce(cluster.bootstrap(), topic, 1, start=100)[0]
        until(consumer, received, lambda: marker in {v for _, v, _ in received}, decide)
        got = [v for _, v, _ in received]
        assert not accepted & set(got), received  # accepted before the failures: never again
        assert got.count(doomed) == 1, received  # not past group.share.delivery.count.limit
        assert set(values) <= accepted | set(got)
    finally:
        consumer.close()

    # reset-offsets: InitializeShareGroupState with the next state epoch; delete: DeleteShareGroupState
    before = wait_for(lambda: (s := state_summary(cluster, group, topic)).error_code == 0 and s, "the state summary")
    wait_for(
        lambda: pylog(cluster.bootstrap(), "reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3",
                      "--execute").returncode == 0,
        "reset-offsets once the group is empty",
    )  # fmt: skip
    after = state_summary(cluster, group, topic)
    assert (after.error_code, after.start_offset) == (0, 3)
    assert after.state_epoch > before.state_epoch
    assert described_start(cluster, group, topic) == 3
    deleted = pylog(cluster.bootstrap(), "delete", "--group", group)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert state_summary(cluster, group, topic).error_code == UNKNOWN_TOPIC_OR_PARTITION
    gone = pylog(cluster.bootstrap(), "describe", "--group", group)
    assert f"Share group '{group}' does not exist." in gone.stderr

    # the same group id afresh: the partition leader's copy of the deleted state is not used again
    again = pylog(
        cluster.bootstrap(), "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"
    )
    assert again.returncode == 0, again.stdout + again.stderr
    fresh = ShareConsumer({
        "bootstrap.servers": cluster.bootstrap(), "group.id": group, "share.acknowledgement.mode": "explicit",
    })  # fmt: skip
    fresh.subscribe([topic])
    anew: list[tuple[int, bytes, int]] = []
    try:
        until(fresh, anew, lambda: set(values) <= {v for _, v, _ in anew}, lambda m: AcknowledgeType.ACCEPT)
        assert {d for _, v, d in anew if v in values} == {1}, anew
    finally:
        fresh.close()


def test_reset_and_delete_reach_a_partition_leader_holding_the_old_state(cluster: EmbeddedCluster) -> None:
    """The group coordinator resets or deletes the state at the share coordinator while another
    broker, the partition's leader, still holds the share-partition in memory: the leader's next
    share session reads the state again (the records from the new start offset are delivered)."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique("reset")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    leader = wait_for(
        lambda: (v := cluster.partitions(topic).get(0)) is not None and v.leader > 0 and v.leader, "a leader"
    )

    def elsewhere() -> str | None:
        return next(
            (g for g in (unique("g") for _ in range(20)) if group_coordinator(cluster, g) not in (None, leader)), None
        )

    group = wait_for(elsewhere, "a group coordinated away from the partition's leader")
    values = produce(cluster.bootstrap(), topic, 6)

    def read_all(wanted: set[bytes]) -> list[tuple[int, bytes, int]]:
        consumer = ShareConsumer({
            "bootstrap.servers": cluster.bootstrap(), "group.id": group, "share.acknowledgement.mode": "explicit",
        })  # fmt: skip
        consumer.subscribe([topic])
        got: list[tuple[int, bytes, int]] = []
        try:
            until(consumer, got, lambda: wanted <= {v for _, v, _ in got}, lambda m: AcknowledgeType.ACCEPT)
        finally:
            consumer.close()
        return got

    def reset(*to: str) -> None:
        done = pylog(cluster.bootstrap(), "reset-offsets", "--group", group, "--topic", topic, *to, "--execute")
        assert done.returncode == 0, done.stdout + done.stderr

    reset("--to-earliest")
    read_all(set(values))  # the leader now holds the share-partition at start offset 6
    wait_for(lambda: pylog(cluster.bootstrap(), "reset-offsets", "--group", group, "--topic", topic, "--to-offset",
                           "3", "--execute").returncode == 0, "reset-offsets once the group is empty")  # fmt: skip
    again = read_all(set(values[3:]))
    assert {v for _, v, _ in again} == set(values[3:])
    node = wait_for(
        lambda: share_coordinator(cluster, f"{group}:{topic_id(cluster, topic)}:0"), "its share coordinator"
    )
    tid = request(cluster.address(node), ApiKey.METADATA, 12, {"topics": [{"name": topic}]}).topics[0].topic_id
    bad = {"first_offset": 5, "last_offset": 4, "delivery_state": 9, "delivery_count": -1}
    body = {
        "group_id": group,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "state_batches": [bad]}
                ],
            }
        ],
    }
    refused = request(cluster.address(node), ApiKey.WRITE_SHARE_GROUP_STATE, 0, body).results[0].partitions[0]
    assert refused.error_code == 42  # INVALID_REQUEST: bad input is refused, the state is kept
    wait_for(lambda: pylog(cluster.bootstrap(), "delete", "--group", group).returncode == 0, "delete")
    reset("--to-earliest")
    assert {v for _, v, _ in read_all(set(values))} == set(values)
