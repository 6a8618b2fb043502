"""Tiered storage on a shared filesystem (KIP-405), real brokers and real clients.

KIP-405 "Kafka Tiered Storage" as users meet it: with ``remote.log.storage.system.enable`` and a
topic's ``remote.storage.enable``, rolled segments are copied to the remote tier (here the
built-in filesystem RemoteStorageManager on a directory every broker shares) and deleted locally
after ``local.retention.*``; a consumer reading from offset 0 gets every record, in order, the
old ones from the tier; ListOffsets -4 (earliest local) and -5 (latest tiered, KIP-1005) answer
what is on disk; ``retention.*`` removes segments from the tier and moves the log start offset;
after the leader is SIGKILLed the new leader serves the history from the tier again, and a
broker whose data disk was replaced rebuilds its replicas and serves the history as leader.

One single broker and one 3-node cluster, each module-scoped; small ``segment.bytes`` and
``local.retention.ms=1`` so segments tier within a few task intervals.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.wire import ApiKey
from pyspark_log.wire.errors import ErrorCode
from tests.integration.cluster_harness import wait_for

FS_RSM = "broker.log.remote.storage.FileSystemRemoteStorageManager"
RECORDS = 1500
RETENTION_BYTES = 40_000
TOPIC_CONFIG = {
    "remote.storage.enable": "true",
    "segment.bytes": "8192",
    "local.retention.ms": "1",
}


def tier_overrides(tier: Path) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": FS_RSM,
        "rsm.config.dir": str(tier),
        "remote.log.manager.task.interval.ms": "300",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "offsets.topic.num.partitions": "3",
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, replication: int = 1, **extra: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, 1, replication, config={**TOPIC_CONFIG, **extra})
    admin.create_topics([topic], operation_timeout=30)[name].result(timeout=60)


def produce(bootstrap: str, topic: str, count: int = RECORDS, *, base_ms: int | None = None) -> list[bytes]:
    """``count`` records to partition 0, acks=all; with ``base_ms`` record i has timestamp
    ``base_ms + 10 * i``."""
    values = [f"record-{i:06d}-".encode() + b"x" * 80 for i in range(count)]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 2000})
    for i, value in enumerate(values):
        extra = {"timestamp": base_ms + 10 * i} if base_ms is not None else {}
        producer.produce(topic, value=value, partition=0, **extra)
        if i % 25 == 24:
            producer.flush(30)
    assert producer.flush(60) == 0
    return values


def list_offset(address: str, topic: str, timestamp: int) -> int:
    """ListOffsets of ``topic``-0 from the broker at ``address``. A broker that the metadata names
    leader may not serve the partition yet (it answers NOT_LEADER_OR_FOLLOWER until it applied the
    change): that answer is waited out, any other error fails."""
    body = {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                   "timestamp": timestamp}]}],
    }  # fmt: skip

    def answered() -> Any:
        part = request(address, ApiKey.LIST_OFFSETS, 8, body).topics[0].partitions[0]
        return None if part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER else part

    part = wait_for(answered, f"{address} serving {topic}-0 as its leader")
    assert part.error_code == 0, part
    return int(part.offset)


def tier_segments(tier: Path, topic: str) -> list[tuple[int, Path]]:
    """``(start offset, path)`` of the whole remote segments of ``topic``-0 in the tier."""
    out = []
    for d in tier.glob(f"{topic}-0-*"):
        for p in d.glob("*.log"):
            out.append((int(re.match(r"(\d{20})-", p.name).group(1)), p))  # type: ignore[union-attr]
    return sorted(out)


def consume_from_zero(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "max.partition.fetch.bytes": 16384,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    try:

        def done() -> bool:
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is None:
                    got.append((message.offset(), message.value()))
            return len(got) >= expected

        wait_for(done, f"{expected} records of {topic} from offset 0")
    finally:
        consumer.close()
    assert [o for o, _ in got] == list(range(got[0][0], got[0][0] + len(got)))
    return [v for _, v in got]


def wait_tiered(address: str, topic: str, tier: Path, *, min_segments: int = 3) -> tuple[int, int]:
    """Wait until most of the history is tiered and deleted locally: ``(earliest local, latest tiered)``."""

    def tiered() -> tuple[int, int] | None:
        local, latest = list_offset(address, topic, -4), list_offset(address, topic, -5)
        if len(tier_segments(tier, topic)) >= min_segments and local > RECORDS // 2 and latest >= local - 1:
            return local, latest
        return None

    return wait_for(tiered, f"{topic}: segments copied to {tier} and deleted locally")


# -- one broker ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, Path]]:
    root = tmp_path_factory.mktemp("tiered-single")
    tier = root / "tier"
    with EmbeddedBroker(root / "node", overrides=tier_overrides(tier)) as broker:
        yield broker, tier


def test_history_mostly_tiered_is_consumed_from_offset_zero(single: tuple[EmbeddedBroker, Path]) -> None:
    broker, tier = single
    topic = unique("tiered")
    create_topic(broker.bootstrap_servers, topic)
    base_ms = int(time.time() * 1000) - 1_800_000
    values = produce(broker.bootstrap_servers, topic, base_ms=base_ms)
    local_start, latest_tiered = wait_tiered(broker.bootstrap_servers, topic, tier)
    assert list_offset(broker.bootstrap_servers, topic, -2) == 0  # the log start is in the tier
    # ListOffsets -4 is the first local segment's base, -5 the last tiered offset
    local_dir = broker.data_dir / "logs" / f"{topic}-0"
    first_local = min(int(p.stem) for p in local_dir.glob("*.log"))
    assert local_start == first_local
    remote = tier_segments(tier, topic)
    assert remote[0][0] == 0
    assert latest_tiered >= local_start - 1
    assert consume_from_zero(broker.bootstrap_servers, topic, RECORDS) == values
    # ListOffsets by timestamp: a tiered record is found in the tier, a local one locally
    for offset in (0, 1, 137, local_start - 1, local_start, RECORDS - 1):
        assert list_offset(broker.bootstrap_servers, topic, base_ms + 10 * offset - 5) == offset
    assert list_offset(broker.bootstrap_servers, topic, base_ms + 10 * RECORDS) == -1


def test_remote_retention_deletes_tier_files(single: tuple[EmbeddedBroker, Path]) -> None:
    broker, tier = single
    topic = unique("tiered-retention")
    create_topic(broker.bootstrap_servers, topic)
    produce(broker.bootstrap_servers, topic)
    wait_tiered(broker.bootstrap_servers, topic, tier)
    before = tier_segments(tier, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", str(RETENTION_BYTES), incremental_operation=AlterConfigOpType.SET),
    ])  # fmt: skip
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    local_dir = broker.data_dir / "logs" / f"{topic}-0"

    def trimmed() -> int | None:
        """The log start once retention.bytes is met: the tier and the untiered local bytes
        together exceed it by less than the oldest remote segment (Kafka's size rule)."""
        start = list_offset(broker.bootstrap_servers, topic, -2)
        remaining = tier_segments(tier, topic)
        latest = list_offset(broker.bootstrap_servers, topic, -5)
        untiered = sum(p.stat().st_size for p in local_dir.glob("*.log") if int(p.stem) > latest)
        total = sum(p.stat().st_size for _, p in remaining) + untiered
        if not remaining or start == 0 or remaining[0][0] != start or len(remaining) >= len(before):
            return None
        return start if total - remaining[0][1].stat().st_size < RETENTION_BYTES else None

    start = wait_for(trimmed, f"{topic}: remote retention deletes tier files")
    assert not any(path.exists() for offset, path in before if offset < start)
    values = consume_from_zero(broker.bootstrap_servers, topic, RECORDS - start)
    assert values[0].startswith(f"record-{start:06d}-".encode())


# -- three brokers sharing the tier ----------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedCluster, Path]]:
    root = tmp_path_factory.mktemp("tiered-cluster")
    tier = root / "tier"
    overrides = {
        **tier_overrides(tier),
        "broker.session.timeout.ms": "6000",
        "transaction.state.log.num.partitions": "3",
    }
    with EmbeddedCluster(root, combined=True, brokers=(1, 2, 3), overrides=overrides) as c:
        # __remote_log_metadata is created on first use, replicated to the brokers live then: all three
        create_topic(c.bootstrap(), unique("tiered-warm-up"), replication=3)

        def metadata_on_every_broker() -> bool:
            parts = c.partitions("__remote_log_metadata")
            return len(parts) == 3 and all(len(p.replicas) == 3 for p in parts.values())

        wait_for(metadata_on_every_broker, "__remote_log_metadata on the three brokers")
        yield c, tier


def test_follower_below_the_local_log_start_rebuilds_from_the_tier(cluster: tuple[EmbeddedCluster, Path]) -> None:
    """KIP-405 "Follower Replication": a follower whose replica came back empty (its disk
    replaced) while the leader tiered and deleted its history is answered
    OFFSET_MOVED_TO_TIERED_STORAGE, restarts at the leader's local log start, takes the leader
    epochs of the tiered part from the tier's checkpoint, and rejoins the ISR."""
    c, tier = cluster
    topic = unique("tiered-follower")
    create_topic(c.bootstrap(), topic, replication=3, **{"min.insync.replicas": "2"})
    wait_for(lambda: c.partitions(topic)[0].leader >= 0, f"{topic} has a leader")
    part = c.partitions(topic)[0]
    follower = next(n for n in part.replicas if n != part.leader)
    c.stop(follower)
    # its replica's disk is replaced: the partition comes back empty (a new broker for this partition)
    shutil.rmtree(c.log_dir(follower, topic, 0))
    try:
        running = tuple(n for n in c.broker_ids if n != follower)
        leader = wait_for(lambda: c.partitions(topic, via=running[0])[0].leader, f"{topic} has a leader")
        produce(c.bootstrap(running), topic)
        local_start, _ = wait_tiered(c.address(leader), topic, tier)
    finally:
        c.restart(follower)

    def rejoined() -> bool:
        now = c.partitions(topic)[0]
        return follower in now.isr and set(now.isr) == set(now.replicas)

    wait_for(rejoined, f"broker {follower} back in the ISR of {topic}")
    follower_dir = c.log_dir(follower, topic, 0)
    first_local = min(int(p.stem) for p in follower_dir.glob("*.log"))
    assert first_local >= local_start > 0  # rebuilt at the leader's local log start, not copied from 0
    lines = (follower_dir / "leader-epoch-checkpoint").read_text().split()
    starts = [int(offset) for offset in lines[3::2]]
    assert starts[0] == 0  # the epoch of the tiered records, from the tier's checkpoint


def test_tiered_history_survives_leader_failover(cluster: tuple[EmbeddedCluster, Path]) -> None:
    c, tier = cluster
    topic = unique("tiered-failover")
    create_topic(c.bootstrap(), topic, replication=3, **{"min.insync.replicas": "2"})
    wait_for(lambda: c.partitions(topic)[0].leader >= 0, f"{topic} has a leader")
    values = produce(c.bootstrap(), topic)
    leader = c.partitions(topic)[0].leader
    wait_tiered(c.address(leader), topic, tier)
    # the shared tier holds one whole copy per segment: no two brokers wrote the same names
    names = [p.name for _, p in tier_segments(tier, topic)]
    assert len(names) == len(set(names))
    assert not list(tier.glob("*/*.tmp"))
    assert consume_from_zero(c.bootstrap(), topic, RECORDS) == values

    c.kill(leader)
    try:
        others = tuple(n for n in c.broker_ids if n != leader)

        def new_leader() -> int | None:
            found = c.partitions(topic, via=others[0])[0].leader
            return found if found in others else None

        moved = wait_for(new_leader, f"{topic}: a new leader after SIGKILL of {leader}")
        assert list_offset(c.address(moved), topic, -2) == 0
        assert consume_from_zero(c.bootstrap(others), topic, RECORDS) == values
    finally:
        c.restart(leader)


def test_a_replaced_broker_rebuilds_and_serves_the_tiered_history(cluster: tuple[EmbeddedCluster, Path]) -> None:
    """A whole broker replaced: its data disk (every partition directory and checkpoint; the
    metadata log, on its own disk as ``metadata.log.dir`` allows, is kept) comes back empty while
    the others tiered the history. It rebuilds every replica it holds, ``__remote_log_metadata``
    included, from the leaders and the tier, rejoins the ISRs, becomes the preferred leader again
    (ElectLeaders) and serves a consumer from offset 0: the old records from the tier."""
    c, tier = cluster
    topic = unique("tiered-replaced")
    replaced = c.broker_ids[-1]
    order = [replaced, *(n for n in c.broker_ids if n != replaced)]
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    new = NewTopic(topic, 1, replica_assignment=[order], config={**TOPIC_CONFIG, "min.insync.replicas": "2"})
    admin.create_topics([new], operation_timeout=30)[topic].result(timeout=60)
    wait_for(lambda: c.partitions(topic)[0].leader == replaced, f"{topic} led by its preferred replica")
    c.stop(replaced)
    data = c.nodes[replaced].data_dir / "logs"
    for path in data.iterdir():
        if path.is_dir() and path.name != "__cluster_metadata-0":
            shutil.rmtree(path)
        elif path.name.endswith("-checkpoint"):
            path.unlink()
    try:
        running = tuple(n for n in c.broker_ids if n != replaced)
        leader = wait_for(lambda: c.partitions(topic, via=running[0])[0].leader, f"{topic} led by another broker")
        values = produce(c.bootstrap(running), topic)
        wait_tiered(c.address(leader), topic, tier)
    finally:
        c.restart(replaced)

    def everything_in_sync() -> bool:
        views = [*c.partitions(topic).values(), *c.partitions("__remote_log_metadata").values()]
        return all(replaced in v.isr and set(v.isr) == set(v.replicas) for v in views)

    wait_for(everything_in_sync, f"broker {replaced} back in every ISR it belongs to")

    def preferred_leads() -> bool:
        # the answer may be ELECTION_NOT_NEEDED once an earlier call elected it: the metadata decides
        with contextlib.suppress(KafkaException):
            admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(timeout=30)
        return c.partitions(topic)[0].leader == replaced

    wait_for(preferred_leads, f"broker {replaced} elected {topic}'s leader again")
    assert list_offset(c.address(replaced), topic, -2) == 0  # the log start is in the tier
    assert list_offset(c.address(replaced), topic, -4) > 0  # its own disk holds only the newest part
    assert consume_from_zero(c.address(replaced), topic, RECORDS) == values
