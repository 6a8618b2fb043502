"""KIP-848 consumer groups with confluent-kafka (librdkafka >= 2.10, ``group.protocol=consumer``)
against a real pylog broker: the broker assigns (ConsumerGroupHeartbeat), members share
partitions, a member that leaves or is killed (SIGKILL: its session times out) hands its
partitions over, a regex subscription picks up a new topic, a group scaled 1 -> 5 -> 1 under load
reads every record exactly once by its committed offsets, the admin API lists and describes
the group with its type and member epochs (ListGroups v5, ConsumerGroupDescribe), and a member's
offsets go into a transaction (TxnOffsetCommit)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline

from .groups_helpers import Member, create_topic, drive, produce, unique

# fast heartbeats and a 3 s session so expiry is quick (Kafka's bounds lowered accordingly)
KIP848_OVERRIDES = {
    "offsets.topic.num.partitions": "5",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "250",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "3000",
}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import confluent_kafka

    if confluent_kafka.libversion()[1] < 0x020A0000:
        pytest.skip("librdkafka < 2.10 has no group.protocol=consumer")
    with EmbeddedBroker(tmp_path_factory.mktemp("kip848"), overrides=KIP848_OVERRIDES) as broker:
        yield broker.bootstrap_servers


def member(name: str, bootstrap: str, group: str, topics: list[str], **extra: Any) -> tuple[Member, Any]:
    """A librdkafka consumer with the KIP-848 protocol; its assignment is the client's own view."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "client.id": name, **extra,
    })  # fmt: skip

    def poll_once() -> list[bytes]:
        msg = consumer.poll(0.05)
        if msg is None or msg.error():
            return []
        return [msg.value()]

    consumer.subscribe(topics)
    return Member(name, poll_once, lambda: {(p.topic, p.partition) for p in consumer.assignment()}), consumer


def exact_split(members: list[Member], partitions: set[tuple[str, int]]) -> Any:
    def check() -> bool:
        sets = [m.assignment() for m in members]
        sizes = [len(s) for s in sets]
        return sum(sizes) == len(partitions) and set().union(*sets) == partitions and max(sizes) - min(sizes) <= 1

    return check


def test_two_members_share_then_a_leaving_member_hands_over(bootstrap: str) -> None:
    topic, group = unique("share"), unique("g")
    create_topic(bootstrap, topic, 4)
    everything = {(topic, p) for p in range(4)}
    values = set(produce(bootstrap, topic, 40))
    m1, c1 = member("c1", bootstrap, group, [topic])
    m2, c2 = None, None
    try:
        drive([m1], lambda: m1.assignment() == everything and set(m1.received) == values, timeout_s=60)
        m2, c2 = member("c2", bootstrap, group, [topic])
        drive([m1, m2], exact_split([m1, m2], everything), timeout_s=60)
        c2.close()
        c2 = None
        drive([m1], lambda: m1.assignment() == everything, timeout_s=60)
    finally:
        for c in (c1, c2):
            if c is not None:
                c.close()


CHILD = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]])
last = -1
while True:
    c.poll(0.1)
    n = len(c.assignment())
    if n != last:
        print("ASSIGNED", n, flush=True)
        last = n
"""


def test_a_killed_member_times_out_and_its_partitions_move(bootstrap: str, tmp_path: Path) -> None:
    """SIGKILL sends no leaving heartbeat: the coordinator fences the member after
    ``group.consumer.session.timeout.ms`` (KIP-848 "Member Expiration")."""
    topic, group = unique("kill"), unique("g")
    create_topic(bootstrap, topic, 4)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), bootstrap, group, topic], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    m1, c1 = member("c1", bootstrap, group, [topic])
    try:
        assert child.stdout is not None
        os.set_blocking(child.stdout.fileno(), False)
        lines: list[str] = []

        def child_has_two() -> bool:
            lines.extend(line.strip() for line in iter(child.stdout.readline, ""))  # type: ignore[union-attr]
            return bool(lines) and lines[-1] == "ASSIGNED 2" and len(m1.assignment()) == 2

        drive([m1], child_has_two, timeout_s=60)
        killed_at = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        drive([m1], lambda: len(m1.assignment()) == 4, timeout_s=60)
        assert time.monotonic() - killed_at >= 1.0  # a session timeout, not a leave
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        c1.close()


def test_a_regex_subscription_picks_up_a_new_topic(bootstrap: str) -> None:
    """librdkafka sends ``^...`` subscriptions as SubscribedTopicRegex (ConsumerGroupHeartbeat v1);
    the coordinator matches it (RE2) against the topics and re-evaluates when one appears."""
    prefix = unique("rx").replace("-", "")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(bootstrap, first, 2)
    m1, c1 = member("c1", bootstrap, unique("g"), [f"^{prefix}-.*"])
    try:
        drive([m1], lambda: m1.assignment() == {(first, 0), (first, 1)}, timeout_s=60)
        create_topic(bootstrap, second, 1)
        values = set(produce(bootstrap, second, 5))
        drive([m1], lambda: (second, 0) in m1.assignment() and values <= set(m1.received), timeout_s=60)
    finally:
        c1.close()


def test_scale_one_five_one_under_load_reads_each_record_once(bootstrap: str) -> None:
    """Members commit each record synchronously before the next poll (where revocations happen),
    so by committed offsets nothing is lost or read twice while the group grows and shrinks."""
    topic, group = unique("scale"), unique("g")
    create_topic(bootstrap, topic, 10)
    sent: list[bytes] = []
    received: list[bytes] = []
    consumers: dict[str, Any] = {}

    def open_member(name: str) -> None:
        from confluent_kafka import Consumer

        c = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name,
        })  # fmt: skip
        c.subscribe([topic])
        consumers[name] = c

    def pump(rounds: int = 1) -> None:
        for _ in range(rounds):
            for c in list(consumers.values()):
                msg = c.poll(0.02)
                if msg is not None and not msg.error():
                    received.append(msg.value())
                    c.commit(message=msg, asynchronous=False)

    def produce_batch(n: int) -> None:
        sent.extend(produce(bootstrap, topic, n, start=len(sent)))

    def owners() -> list[int]:
        return [len(c.assignment()) for c in consumers.values()]

    try:
        open_member("m0")
        produce_batch(30)
        deadline = Deadline(90)
        while owners() != [10] and not deadline.expired():
            pump()
        for name in ("m1", "m2", "m3", "m4"):
            open_member(name)
            produce_batch(30)
            pump(5)
        while sorted(owners()) != [2, 2, 2, 2, 2] and not deadline.expired():
            pump()
            if len(sent) < 300:
                produce_batch(3)
        assert sorted(owners()) == [2, 2, 2, 2, 2]
        for name in ("m4", "m3", "m2", "m1"):
            produce_batch(30)
            pump(5)
            consumers.pop(name).close()
        while (owners() != [10] or len(received) < len(sent)) and not deadline.expired():
            pump()
        assert owners() == [10]
        assert len(received) == len(set(received)), "a record was read twice"
        assert set(received) == set(sent), "a record was lost"
    finally:
        for c in consumers.values():
            c.close()


def test_admin_lists_and_describes_the_consumer_group(bootstrap: str) -> None:
    """ListGroups v5 with a type filter and ConsumerGroupDescribe through librdkafka's admin API."""
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    topic, group = unique("admin"), unique("g")
    create_topic(bootstrap, topic, 2)
    m1, c1 = member("c1", bootstrap, group, [topic])
    try:
        drive([m1], lambda: len(m1.assignment()) == 2, timeout_s=60)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=30)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1
        assert mine[0].type == ConsumerGroupType.CONSUMER
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(timeout=30)
        assert group not in {g.group_id for g in classic.valid}
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert str(described.state).upper().endswith("STABLE")
        (only,) = described.members
        assert only.client_id == "c1"
        assert {(tp.topic, tp.partition) for tp in only.assignment.topic_partitions} == {(topic, 0), (topic, 1)}
    finally:
        c1.close()


def pylog_groups(bootstrap: str, *args: str) -> str:
    """``python -m pyspark_log.cli groups ...``; its stdout (exit 0 required)."""
    env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", bootstrap, "groups", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pylog_groups_shows_the_type_and_member_epochs(bootstrap: str) -> None:
    """``pylog groups list --type`` and ``describe --members --verbose`` / ``--state`` of a KIP-848
    group: its type, each member's epoch and assignments, the group and target-assignment epochs."""
    topic, group = unique("cli"), unique("g")
    create_topic(bootstrap, topic, 2)
    m1, c1 = member("c1", bootstrap, group, [topic])
    try:
        drive([m1], lambda: len(m1.assignment()) == 2, timeout_s=60)
        listed = json.loads(pylog_groups(bootstrap, "list", "--type", "consumer", "--output", "json"))
        assert {"groupId": group, "state": "Stable", "protocolType": "consumer", "type": "consumer"} in listed
        rows = pylog_groups(bootstrap, "list", "--type").splitlines()
        assert rows[0].split() == ["GROUP", "TYPE"]
        assert [group, "consumer"] in [r.split() for r in rows]
        (described,) = json.loads(
            pylog_groups(bootstrap, "describe", "--group", group, "--members", "--output", "json")
        )
        assert described["type"] == "consumer"
        assert described["groupEpoch"] >= 1
        assert described["targetAssignmentEpoch"] == described["groupEpoch"]
        (only,) = described["members"]
        assert only["memberEpoch"] == described["groupEpoch"]
        assert (
            only["assignment"]
            == only["targetAssignment"]
            == [
                {"topic": topic, "partition": 0},
                {"topic": topic, "partition": 1},
            ]
        )
        text = pylog_groups(bootstrap, "describe", "--group", group, "--members", "--verbose").splitlines()
        header = next(line.split() for line in text if line.startswith("GROUP"))
        assert header[-4:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        state = pylog_groups(bootstrap, "describe", "--group", group, "--state")
        assert "GROUP-EPOCH" in state
        assert "TARGET-ASSIGNMENT-EPOCH" in state
        assert "uniform" in state
    finally:
        c1.close()


def test_epoch_errors_on_the_wire(bootstrap: str) -> None:
    """Raw requests: a join (ConsumerGroupHeartbeat v1, client-made member id, KIP-1082), then
    FENCED_MEMBER_EPOCH for a wrong epoch, UNKNOWN_MEMBER_ID for an unknown member, INVALID_REQUEST
    for an empty member id, OffsetCommit v9 / OffsetFetch v9 with a stale epoch answered
    STALE_MEMBER_EPOCH (KIP-848 "Offset Commit and Fetch"), DescribeGroups answering Dead for a
    consumer group (Kafka's DescribeGroups < v6), ListGroups v5 filtering by type, OffsetDelete of a
    subscribed topic refused while the group has members (GROUP_SUBSCRIBED_TO_TOPIC)."""
    from pyspark_log.embedded_cluster import request
    from pyspark_log.wire import ApiKey, ErrorCode

    topic, group = unique("wire"), unique("g")
    create_topic(bootstrap, topic, 1)

    def coordinator_ready() -> bool:
        found = request(bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        return found.error_code == ErrorCode.NONE

    deadline = Deadline(60)
    while not coordinator_ready():
        assert not deadline.expired(), "no group coordinator"
        time.sleep(0.2)

    def heartbeat(member_id: str, epoch: int, **extra: Any) -> Any:
        body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, **extra}
        return request(bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)

    joined = heartbeat("member-1", 0, rebalance_timeout_ms=30000, subscribed_topic_names=[topic], topic_partitions=[])
    deadline = Deadline(60)
    while joined.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and not deadline.expired():
        joined = heartbeat("member-1", 0, rebalance_timeout_ms=30000, subscribed_topic_names=[topic],
                           topic_partitions=[])  # fmt: skip
    assert joined.error_code == ErrorCode.NONE, joined
    assert joined.member_id == "member-1"
    epoch = joined.member_epoch
    assert epoch >= 1
    assert joined.heartbeat_interval_ms == 250
    assert [list(tp.partitions) for tp in joined.assignment.topic_partitions] == [[0]]
    assert heartbeat("member-1", epoch + 5).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat("nobody", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat("", 0, rebalance_timeout_ms=1, subscribed_topic_names=[topic]).error_code == (
        ErrorCode.INVALID_REQUEST
    )

    def commit(member_id: str, member_epoch: int) -> int:
        body = {"group_id": group, "generation_id_or_member_epoch": member_epoch, "member_id": member_id,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 3,
                                                            "committed_metadata": None}]}]}  # fmt: skip
        done = request(bootstrap, ApiKey.OFFSET_COMMIT, 9, body)
        return done.topics[0].partitions[0].error_code

    assert commit("member-1", epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit("nobody", epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit("member-1", epoch) == ErrorCode.NONE

    def fetch(member_epoch: int) -> Any:
        body = {"groups": [{"group_id": group, "member_id": "member-1", "member_epoch": member_epoch, "topics": None}]}
        return request(bootstrap, ApiKey.OFFSET_FETCH, 9, body).groups[0]

    assert fetch(epoch - 1).error_code == ErrorCode.STALE_MEMBER_EPOCH
    fetched = fetch(epoch)
    assert fetched.error_code == ErrorCode.NONE
    assert fetched.topics[0].partitions[0].committed_offset == 3

    described = request(bootstrap, ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group]}).groups[0]
    assert (described.error_code, described.group_state, list(described.members)) == (0, "Dead", [])
    listed = request(bootstrap, ApiKey.LIST_GROUPS, 5, {"types_filter": ["consumer"]}).groups
    assert (group, "consumer", "consumer") in {(g.group_id, g.group_type, g.protocol_type) for g in listed}
    classic = request(bootstrap, ApiKey.LIST_GROUPS, 5, {"types_filter": ["classic"]}).groups
    assert group not in {g.group_id for g in classic}
    body = {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]}
    refused = request(bootstrap, ApiKey.OFFSET_DELETE, 0, body)
    assert refused.error_code == ErrorCode.NONE
    assert refused.topics[0].partitions[0].error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    left = heartbeat("member-1", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.NONE, -1)
    deleted = request(bootstrap, ApiKey.OFFSET_DELETE, 0, body)  # an empty group's offsets can go
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE
    gone = request(bootstrap, ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]}).results[0]
    assert gone.error_code == ErrorCode.NONE
    body = {"group_ids": [group], "include_authorized_operations": False}
    after = request(bootstrap, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body).groups[0]
    assert after.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_static_member_restarts_without_a_reassignment(bootstrap: str) -> None:
    """KIP-848 static membership: a closing static member leaves with epoch -2 and keeps its
    assignment; its successor (same ``group.instance.id``, new member id) gets the same
    partitions back, and the other member's assignment never changes."""
    topic, group = unique("static"), unique("g")
    create_topic(bootstrap, topic, 4)
    static = {"group.instance.id": unique("instance")}
    ms, cs = member("static", bootstrap, group, [topic], **static)
    md, cd = member("dynamic", bootstrap, group, [topic])
    try:
        everything = {(topic, p) for p in range(4)}
        drive([ms, md], exact_split([ms, md], everything), timeout_s=60)
        kept, other = ms.assignment(), md.assignment()
        seen: list[set[tuple[str, int]]] = []
        cs.close()
        ms, cs = member("static-again", bootstrap, group, [topic], **static)

        def back() -> bool:
            seen.append(md.assignment())
            return ms.assignment() == kept

        drive([ms, md], back, timeout_s=60)
        for _ in range(20):  # a reassignment, if any, gets the chance to show
            md.poll()
            seen.append(md.assignment())
        assert all(s == other for s in seen)
    finally:
        cs.close()
        cd.close()


def test_a_restarted_coordinator_resumes_the_same_epochs(tmp_path: Path) -> None:
    """The group's state is written to ``__consumer_offsets`` with Kafka's consumer group records:
    after the coordinator restarts it reloads them and the member goes on heartbeating at the
    epoch it had, with its assignment, without rejoining (its own broker: it is restarted)."""
    from pyspark_log.embedded_cluster import request
    from pyspark_log.wire import ApiKey

    with EmbeddedBroker(tmp_path / "restart", overrides=KIP848_OVERRIDES) as broker:
        bootstrap = broker.bootstrap_servers
        topic, group = unique("restart"), unique("g")
        create_topic(bootstrap, topic, 3)
        m1, c1 = member("c1", bootstrap, group, [topic])
        m2, c2 = member("c2", bootstrap, group, [topic])
        try:
            everything = {(topic, p) for p in range(3)}
            drive([m1, m2], exact_split([m1, m2], everything), timeout_s=60)

            def described() -> Any:
                try:
                    body = {"group_ids": [group], "include_authorized_operations": False}
                    return request(bootstrap, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body).groups[0]
                except OSError:
                    return None

            def stable() -> Any:
                found = described()
                return found if found is not None and found.group_state == "Stable" else None

            before = None
            deadline = Deadline(60)
            while before is None and not deadline.expired():
                m1.poll()
                m2.poll()
                before = stable()
            assert before is not None
            epochs = {m.member_id: m.member_epoch for m in before.members}
            owned = (m1.assignment(), m2.assignment())
            broker.restart()
            after = None
            deadline = Deadline(90)
            while not deadline.expired():
                m1.poll()
                m2.poll()
                after = stable()
                if after is not None and {m.member_id: m.member_epoch for m in after.members} == epochs:
                    break
            assert after is not None
            assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
            assert {m.member_id: m.member_epoch for m in after.members} == epochs
            assert (m1.assignment(), m2.assignment()) == owned
            # reloaded from the records, not rebuilt by rejoins that happen to reach the same epochs
            assert f"consumer group {group} loaded at epoch {before.group_epoch} (2 member(s))" in broker.output()
        finally:
            c1.close()
            c2.close()


def test_the_consumer_protocol_can_be_turned_off(tmp_path: Path) -> None:
    """``group.coordinator.rebalance.protocols=classic``: ApiVersions leaves out
    ConsumerGroupHeartbeat and ConsumerGroupDescribe (clients then say the cluster does not
    support the consumer protocol), and a heartbeat sent anyway is refused."""
    from pyspark_log.embedded_cluster import request
    from pyspark_log.wire import ApiKey, ErrorCode

    overrides = {**KIP848_OVERRIDES, "group.coordinator.rebalance.protocols": "classic"}
    with EmbeddedBroker(tmp_path / "classic-only", overrides=overrides) as broker:
        address = broker.bootstrap_servers
        keys = {k.api_key for k in request(address, ApiKey.API_VERSIONS, 3, {}).api_keys}
        assert ApiKey.JOIN_GROUP in keys
        assert not keys & {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}
        body = {"group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 1000,
                "subscribed_topic_names": ["t"], "topic_partitions": []}  # fmt: skip
        refused = request(address, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
        assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_a_member_sends_its_offsets_to_a_transaction(bootstrap: str) -> None:
    """Consume-transform-produce with a KIP-848 member: librdkafka's ``send_offsets_to_transaction``
    sends TxnOffsetCommit with the member id and epoch (``consumer_group_metadata()``), checked
    against the consumer group's member (it was UNKNOWN_MEMBER_ID: pylog looked for a classic
    member); the offsets are the group's once the transaction commits."""
    from confluent_kafka import Producer, TopicPartition

    source, sink, group = unique("eos-src"), unique("eos-sink"), unique("g")
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    produce(bootstrap, source, 5)
    m1, consumer = member("c1", bootstrap, group, [source], **{"enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn")})
    try:
        drive([m1], lambda: len(m1.received) == 5, timeout_s=60)
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(sink, b"derived")
        metadata = consumer.consumer_group_metadata()
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 5)], metadata, 30)
        producer.commit_transaction(30)
        (committed,) = consumer.committed([TopicPartition(source, 0)], timeout=30)
        assert committed.offset == 5
    finally:
        producer.flush(10)
        consumer.close()
