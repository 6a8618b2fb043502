"""Replication throttles (KIP-73) on a real 3-node KRaft cluster: ``pylog reassign-partitions
--execute --throttle R`` moves a partition at R bytes/s, and ``--verify`` removes the throttles.

The rate is measured on the receiving broker's disk: the new replica's segment bytes, sampled
while it catches up, between a quarter and three quarters of the partition (past the start-up
and the first window's burst, before the end), as the least-squares slope of the samples. The
windows are shortened (``replication.quota.window.num`` 2 x 1 s) so that the burst Kafka's rate
measurement allows at the start (``num - 1`` windows' worth of bytes) stays small against the
partition, and the replica grows in small steps (64 KiB producer batches, 256 KiB follower
fetches) rather than in 1 MB ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import wait_for
from tests.integration.test_broker_metrics import scrape
from tests.waiting import Deadline

RATE = 2_000_000  # bytes/s
TOTAL = 20_000_000  # bytes in the moved partition
OVERRIDES = {
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "replication.quota.window.num": "2",
    "replication.quota.window.size.seconds": "1",
    "replica.fetch.max.bytes": "262144",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(
        tmp_path_factory.mktemp("throttle"), brokers=(1, 2, 3), combined=True, overrides=OVERRIDES, metrics=True
    ) as c:
        yield c


def pylog(cluster: EmbeddedCluster, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", "reassign-partitions", "--bootstrap-server", cluster.bootstrap()]
    env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=120, env=env, check=False)


def replica_bytes(cluster: EmbeddedCluster, node: int, topic: str) -> int:
    directory = cluster.log_dir(node, topic, 0)
    if not directory.is_dir():
        return 0
    return sum(f.stat().st_size for f in directory.glob("*.log") if f.exists())


def follower_byte_rate(cluster: EmbeddedCluster, node: int) -> float:
    return scrape(cluster.metrics_address(node))["kafka_server_followerreplication_byte_rate"]


def least_squares_slope(points: list[tuple[float, int]]) -> float:
    """The slope of the least-squares line through ``(x, y)`` points."""
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def topic_config(cluster: EmbeddedCluster, topic: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(timeout=60)[key].value


def test_a_throttled_move_runs_at_its_rate_and_verify_removes_the_throttles(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    topic = f"throttled-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]])], operation_timeout=30)[topic].result(60)
    wait_for(lambda: 0 in cluster.partitions(topic), f"topic {topic} in the metadata")
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 20, "batch.size": 65536})
    value = b"v" * 10_000
    for _ in range(TOTAL // len(value)):
        producer.produce(topic, value)
        producer.poll(0)
    assert producer.flush(60) == 0
    written = replica_bytes(cluster, 1, topic)
    assert written >= TOTAL

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2]}]}))
    done = pylog(cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", str(RATE))
    assert done.returncode == 0, done.stderr
    assert "Warning: You must run --verify periodically, until the reassignment completes" in done.stdout
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in done.stdout
    assert topic_config(cluster, topic, "leader.replication.throttled.replicas") == "0:1"
    assert topic_config(cluster, topic, "follower.replication.throttled.replicas") == "0:2"

    # (when, bytes) of the new replica, sampled from a quarter to three quarters of the partition.
    # It grows in steps (whole fetches, and a burst as each quota window rolls over), so the rate is
    # the least-squares slope of all the samples, not the difference of two of them.
    samples: list[tuple[float, int]] = []
    reported: list[float] = []  # the receiving broker's byte-rate metric, sampled mid-move
    caught_up = False
    deadline = Deadline(120)
    while not caught_up and not deadline.expired():
        held = replica_bytes(cluster, 2, topic)
        sampled_at = time.monotonic()
        caught_up = held >= 0.75 * written
        if 0.25 * written <= held and not caught_up:
            samples.append((sampled_at, held))
            reported.append(follower_byte_rate(cluster, 2))
        time.sleep(0.05)  # sampling the disk, not waiting for a state
    assert caught_up, "the new replica did not catch up within 120 s"
    assert len(samples) >= 10, f"too few samples of the move: {samples}"
    # mid-move, the receiving broker reports its throttled rate (kafka.server:type=FollowerReplication).
    # One reading swings with the windows (the previous full window plus a fetch of up to
    # replica.fetch.max.bytes over one window's time), so the median of the readings is compared.
    mid_move = sorted(reported)[len(reported) // 2]
    assert 0.5 * RATE <= mid_move <= 1.5 * RATE, f"byte-rate read {reported} with a throttle of {RATE:,} B/s"
    rate = least_squares_slope(samples)
    print(f"throttled move: {rate:,.0f} B/s with a throttle of {RATE:,} B/s")
    # The throttle is a bound (KIP-73): the move may not run faster (a fifth for the measurement's
    # steps), and it must not crawl either. Both brokers hold the partition back as their own
    # window says (leader and follower throttles), so it runs somewhat below the bound.
    assert 0.5 * RATE <= rate <= 1.2 * RATE, f"moved at {rate:,.0f} B/s with a throttle of {RATE:,} B/s"

    def verified() -> subprocess.CompletedProcess[str] | None:
        out = pylog(cluster, "--verify", "--reassignment-json-file", str(plan))
        return out if out.returncode == 0 else None

    out = wait_for(verified, "--verify reporting the move completed")
    assert f"Reassignment of partition {topic}-0 is completed." in out.stdout
    assert "Clearing broker-level throttles on brokers 1,2,3" in out.stdout
    assert f"Clearing topic-level throttles on topic {topic}" in out.stdout
    assert topic_config(cluster, topic, "leader.replication.throttled.replicas") == ""
    assert topic_config(cluster, topic, "follower.replication.throttled.replicas") == ""
    resource = ConfigResource("broker", "2")
    configs = admin.describe_configs([resource])[resource].result(timeout=60)
    rate_left = configs.get("follower.replication.throttled.rate")
    assert rate_left is None or rate_left.value in (None, str(2**63 - 1))  # described only while set
