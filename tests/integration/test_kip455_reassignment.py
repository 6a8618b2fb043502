"""Partition reassignment (KIP-455) on a real 4-node KRaft cluster (combined nodes, loopback).

* AlterPartitionReassignments moves an RF-3 topic off broker 1 (and its leaders with it) while an
  idempotent acks=all confluent-kafka producer writes and a read_committed consumer reads: no
  acknowledged record is lost or duplicated, the target replicas hold identical segment bytes at
  the end, and the removed replica's log is deleted.
* A move whose added replica cannot catch up (its broker stopped) shows in
  ListPartitionReassignments (replicas the union, adding/removing as Kafka lists them) and in
  Metadata; a null replica list cancels it and the partition is back on its original replicas.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.wire import ApiKey, ErrorCode
from tests.integration.cluster_harness import wait_for
from tests.terminal import run_on_pty

OVERRIDES = {
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(
        tmp_path_factory.mktemp("reassign"), combined=True, brokers=(1, 2, 3, 4), overrides=OVERRIDES
    ) as c:
        yield c


def create_topic(cluster: EmbeddedCluster, name: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment)], operation_timeout=30)[
        name
    ].result(timeout=60)
    wait_for(lambda: len(cluster.partitions(name)) == len(assignment), f"topic {name} in the metadata")


def alter(cluster: EmbeddedCluster, via: int, topic: str, targets: dict[int, list[int] | None]) -> dict[int, int]:
    body = {
        "timeout_ms": 60000,
        "allow_replication_factor_change": True,
        "topics": [{"name": topic, "partitions": [{"partition_index": p, "replicas": r} for p, r in targets.items()]}],
    }
    response = request(cluster.address(via), ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, body, timeout_s=90)
    assert response.error_code == ErrorCode.NONE, response
    return {p.partition_index: p.error_code for t in response.responses for p in t.partitions}


def ongoing(cluster: EmbeddedCluster, via: int) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    response = request(
        cluster.address(via), ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": None}
    )
    assert response.error_code == ErrorCode.NONE
    return {
        (t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in response.topics
        for p in t.partitions
    }


def test_move_off_a_broker_under_an_idempotent_producer_and_read_committed_consumer(cluster: EmbeddedCluster) -> None:
    topic = f"move-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [[1, 2, 3], [2, 1, 3]])
    acked: list[bytes] = []
    stop = threading.Event()
    failures: list[str] = []

    def produce() -> None:
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )

        def delivered(err: object, msg: object) -> None:
            if err is None:
                acked.append(msg.value())  # type: ignore[attr-defined]

        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=f"v{i}".encode(), partition=i % 2, on_delivery=delivered)
                i += 1
            except BufferError:
                pass
            producer.poll(0.002)
        if producer.flush(120) != 0:
            failures.append("producer did not flush")

    seen: list[bytes] = []
    consuming = threading.Event()

    def consume() -> None:
        consumer = Consumer(
            {"bootstrap.servers": cluster.bootstrap(), "group.id": f"g-{topic}", "enable.auto.commit": False,
             "isolation.level": "read_committed"}
        )  # fmt: skip
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
        try:
            while not consuming.is_set():
                seen.extend(m.value() for m in consumer.consume(500, timeout=0.2) if m.error() is None)
        finally:
            consumer.close()

    producer_thread = threading.Thread(target=produce)
    consumer_thread = threading.Thread(target=consume)
    producer_thread.start()
    consumer_thread.start()
    try:
        wait_for(lambda: len(acked) > 500, "records acknowledged before the move")
        assert alter(cluster, 3, topic, {0: [2, 3, 4], 1: [4, 3, 2]}) == {0: ErrorCode.NONE, 1: ErrorCode.NONE}

        def moved() -> bool:
            view = cluster.partitions(topic)
            return (
                view[0].replicas == (2, 3, 4) and set(view[0].isr) == {2, 3, 4} and view[0].leader == 2
                and view[1].replicas == (4, 3, 2) and set(view[1].isr) == {2, 3, 4} and view[1].leader in (2, 3, 4)
            )  # fmt: skip

        wait_for(moved, "the partitions on brokers 2, 3, 4 with leaders off broker 1")
        wait_for(lambda: not ongoing(cluster, 1), "no reassignment listed")
        before = len(acked)
        wait_for(lambda: len(acked) > before + 300, "records acknowledged after the move")
    finally:
        stop.set()
        producer_thread.join(150)
    assert not failures
    wanted = set(acked)
    try:
        wait_for(lambda: wanted <= set(seen), f"all {len(wanted)} acknowledged records read", timeout_s=120)
    finally:
        consuming.set()
        consumer_thread.join(30)
    assert len(seen) == len(set(seen)), "duplicates read"
    for p in (0, 1):
        wait_for(
            lambda p=p: len({cluster.segment_bytes(b, topic, p) for b in (2, 3, 4)}) == 1,
            f"identical replicas of {topic}-{p}",
        )
        wait_for(lambda p=p: not cluster.log_dir(1, topic, p).exists(), f"broker 1's log of {topic}-{p} deleted")


def test_list_shows_a_move_in_progress_and_cancel_reverts(cluster: EmbeddedCluster) -> None:
    topic = f"cancel-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [[1, 2, 3]])
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True, "acks": "all"})
    for i in range(100):
        producer.produce(topic, value=f"c{i}".encode(), partition=0)
    assert producer.flush(60) == 0
    cluster.stop(4)  # registered but fenced: the added replica cannot catch up
    try:
        assert alter(cluster, 1, topic, {0: [1, 2, 4]}) == {0: ErrorCode.NONE}
        listed = wait_for(lambda: ongoing(cluster, 2).get((topic, 0)), "the move listed")
        assert listed == ([1, 2, 4, 3], [4], [3])
        view = cluster.partitions(topic, via=2)[0]
        assert view.replicas == (1, 2, 4, 3)
        assert 4 not in view.isr
        assert alter(cluster, 2, topic, {0: None}) == {0: ErrorCode.NONE}
        wait_for(lambda: cluster.partitions(topic, via=1)[0].replicas == (1, 2, 3), "the original replicas back")
        assert (topic, 0) not in ongoing(cluster, 1)
        assert alter(cluster, 1, topic, {0: None}) == {0: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    finally:
        cluster.restart(4)
    wait_for(lambda: set(cluster.partitions(topic, via=4)[0].isr) == {1, 2, 3}, "the ISR whole again")


def pylog(cluster: EmbeddedCluster, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", "reassign-partitions", "--bootstrap-server", cluster.bootstrap()]
    env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=120, env=env, check=False)


def test_pylog_reassign_partitions(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    """``pylog reassign-partitions`` with kafka-reassign-partitions' files and lines: a move stuck
    on a stopped broker is still in progress for --verify (exit 1) and --list, --cancel reverts
    it; --generate proposes a placement on --broker-list, --execute of it completes (--verify)."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [[1, 2], [2, 3]])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 4]}]}))
    cluster.stop(4)  # registered but fenced: the added replica cannot catch up
    try:
        done = pylog(cluster, "--execute", "--reassignment-json-file", str(plan))
        assert done.returncode == 0, done.stderr
        assert "Save this to use as the --reassignment-json-file option during rollback" in done.stdout
        assert f"Successfully started partition reassignment for {topic}-0" in done.stdout
        done = pylog(cluster, "--verify", "--reassignment-json-file", str(plan))
        assert done.returncode == 1
        assert f"Reassignment of partition {topic}-0 is still in progress." in done.stdout
        done = pylog(cluster, "--list")
        assert f"{topic}-0: replicas: [1, 4, 2]. adding: [4]. removing: [2]." in done.stdout
        done = pylog(cluster, "--cancel", "--reassignment-json-file", str(plan))
        assert f"Successfully cancelled partition reassignment for: {topic}-0" in done.stdout, done.stderr
    finally:
        cluster.restart(4)
    wait_for(lambda: cluster.partitions(topic)[0].replicas == (1, 2), "the original replicas back")
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    done = pylog(cluster, "--generate", "--topics-to-move-json-file", str(topics_file), "--broker-list", "3,4")
    assert done.returncode == 0, done.stderr
    current, proposed = done.stdout.split("Proposed partition reassignment configuration")
    assert json.loads(current.split("Current partition replica assignment")[1])["partitions"][0]["replicas"] == [1, 2]
    proposal = json.loads(proposed)
    assert [set(p["replicas"]) for p in proposal["partitions"]] == [{3, 4}, {3, 4}]
    plan.write_text(proposed)
    argv = [sys.executable, "-m", "pyspark_log.cli", "reassign-partitions", "--bootstrap-server", cluster.bootstrap()]
    code, out, terminal = run_on_pty([*argv, "--execute", "--reassignment-json-file", str(plan)])
    assert code == 0, terminal
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in out
    assert "Starting reassignments" in terminal  # the progress bar, drawn on a terminal only
    assert "2/2" in terminal

    def completed() -> bool:
        out = pylog(cluster, "--verify", "--reassignment-json-file", str(plan))
        return out.returncode == 0 and out.stdout.count("is completed.") == 2

    wait_for(completed, "--verify reporting both moves completed")
    assert {set(v.replicas) == {3, 4} for v in cluster.partitions(topic).values()} == {True}
