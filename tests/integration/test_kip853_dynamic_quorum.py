"""KIP-853 dynamic quorum on a real cluster: add a controller, then replace the active one, under load.

Three controllers formatted with ``pylog storage format --initial-controllers`` (directory ids
chosen up front, ``controller.quorum.bootstrap.servers`` on every node, a separate CONTROLLER
listener as in Kafka) and three brokers. While an idempotent acks=all producer writes and topics
are created:

1. a fourth controller is formatted with ``--no-initial-controllers`` and started (it follows the
   log as an observer), then ``pylog metadata-quorum add-controller`` makes it a voter: the answer
   comes once the new VotersRecord is committed and ``describe --status`` lists four voters;
2. the machine of the active controller is replaced: ``pylog metadata-quorum remove-controller``
   removes the leader itself (it leads until the removal commits, then resigns, KIP-853), it is
   stopped, and another voter is elected among the three left;
3. controller 7 restarts on another port: it sends UpdateRaftVoter and the voter set records its
   new endpoint.

Then: every acknowledged record is read back, none twice; every created topic is in every broker's
metadata (no metadata lost, the brokers followed throughout); ``describe --replication`` shows the
brokers as caught-up observers. Kafka 4.1.1's own ``kafka-metadata-quorum`` describes the quorum and
adds and removes a controller against pylog (``test_kafka_tool_adds_and_removes_a_controller``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import consume, wait_for

PARTITIONS = 3
CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5, 6)
OVERRIDES = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    root = tmp_path_factory.mktemp("kip853")
    with EmbeddedCluster(
        root, controllers=CONTROLLERS, brokers=BROKERS, dynamic_quorum=True, controller_listener=True,
        overrides=OVERRIDES,
    ) as c:  # fmt: skip
        yield c


def pylog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyspark_log.cli", *args], capture_output=True, text=True, check=False, timeout=180
    )


def status(cluster: EmbeddedCluster) -> dict[str, Any] | None:
    """``pylog metadata-quorum describe --status`` as JSON (None while the quorum has no leader)."""
    done = pylog("metadata-quorum", "--bootstrap-server", cluster.bootstrap(), "--output", "json", "describe",
                 "--status")  # fmt: skip
    return json.loads(done.stdout) if done.returncode == 0 else None


def voters(cluster: EmbeddedCluster) -> set[int]:
    current = status(cluster)
    return {v["id"] for v in current["CurrentVoters"]} if current else set()


def controller_properties(node: EmbeddedBroker, path: Path) -> Path:
    """The properties file of a running controller, as an operator hands it to add-controller."""
    props = {**node.overrides, "log.dirs": str(node.data_dir / "logs")}
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@dataclass
class Load:
    """An idempotent acks=all producer and a topic creator, each in a thread of its own."""

    bootstrap: str
    topic: str
    acked: list[bytes] = field(default_factory=list)
    failed: list[KafkaError] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for target in (self._produce, self._create_topics):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self.threads.append(thread)

    def _produce(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
             "message.timeout.ms": 300000}
        )  # fmt: skip

        def delivered(err: KafkaError | None, msg: Any) -> None:
            (self.failed.append(err) if err is not None else self.acked.append(msg.value()))

        sent = 0
        while not self.stop.is_set():
            if len(producer) < 100:
                producer.produce(self.topic, value=f"r{sent}".encode(), on_delivery=delivered)
                sent += 1
            producer.poll(0.01)
        producer.flush(300)

    def _create_topics(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while not self.stop.wait(0.5):
            name = f"kip853-{uuid.uuid4().hex[:8]}"
            try:
                admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=60)[name].result(timeout=90)
            except Exception:  # a creation refused during an election: the next one has a new name
                continue
            self.topics.append(name)

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(330)


def metadata_topics(address: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": address})
    return set(admin.list_topics(timeout=30).topics)


def test_add_a_controller_then_replace_the_active_one_under_load(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    topic = f"kip853-load-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)], operation_timeout=60)[topic].result(timeout=90)
    wait_for(lambda: voters(cluster) == set(CONTROLLERS), "the three initial voters")
    load = Load(cluster.bootstrap(), topic)
    load.start()
    try:
        wait_for(lambda: len(load.acked) >= 200 and load.topics, "records and a topic under the old quorum")

        # 1. grow: controller 7 joins as an observer, then add-controller makes it a voter
        new = cluster.add_controller(7)
        config = controller_properties(new, tmp_path / "controller-7.properties")

        def added() -> bool:  # refused (REQUEST_TIMED_OUT) until it has caught up as an observer
            done = pylog("metadata-quorum", "--bootstrap-server", cluster.bootstrap(), "--command-config",
                         str(config), "add-controller")  # fmt: skip
            return done.returncode == 0 and "Added controller 7 with directory id" in done.stdout

        wait_for(added, "add-controller 7")
        assert voters(cluster) == {1, 2, 3, 7}
        count = len(load.acked)
        wait_for(lambda: len(load.acked) >= count + 200, "records acknowledged by the four-voter quorum")

        # 2. replace the machine of the active controller
        current = wait_for(lambda: status(cluster), "a quorum leader")
        leader = current["LeaderId"]
        directory = next(v["directoryId"] for v in current["CurrentVoters"] if v["id"] == leader)
        assert directory == cluster.directory_ids.get(leader, directory)
        done = pylog("metadata-quorum", "--bootstrap-controller", cluster.controller_address(7), "remove-controller",
                     "--controller-id", str(leader), "--controller-directory-id", directory)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"Removed  KRaft controller {leader} with directory id {directory}"
        cluster.stop(leader)
        remaining = {1, 2, 3, 7} - {leader}

        def new_leader() -> dict[str, Any] | None:
            now = status(cluster)
            return now if now and now["LeaderId"] in remaining and voters(cluster) == remaining else None

        after = wait_for(new_leader, f"a leader among {sorted(remaining)}")
        assert after["LeaderEpoch"] > current["LeaderEpoch"]
        count, topics = len(load.acked), len(load.topics)
        wait_for(lambda: len(load.acked) >= count + 200 and len(load.topics) > topics, "load under the new quorum")

        # 3. controller 7's machine moves (a new port): UpdateRaftVoter records its new endpoint
        cluster.move_controller(7)
        moved = f"CONTROLLER://{cluster.controller_address(7)}"

        def updated() -> bool:
            now = status(cluster)
            return bool(now) and any(v["id"] == 7 and v.get("endpoints") == [moved] for v in now["CurrentVoters"])

        wait_for(updated, "the voter set recording controller 7's new endpoint")
        count = len(load.acked)
        wait_for(lambda: len(load.acked) >= count + 100, "records acknowledged after the move")
    finally:
        load.join()

    assert not load.failed, load.failed[:3]
    # every acknowledged record is there once, every created topic on every broker
    seen = [value for _, value in consume(cluster.bootstrap(), topic, PARTITIONS, len(load.acked))]
    assert sorted(seen) == sorted(load.acked)
    for broker in BROKERS:
        wait_for(lambda b=broker: set(load.topics) <= metadata_topics(cluster.address(b)), f"topics on {broker}")
    done = pylog("metadata-quorum", "--bootstrap-server", cluster.bootstrap(), "--output", "json", "describe",
                 "--replication")  # fmt: skip
    rows = {r["NodeId"]: r for r in json.loads(done.stdout)}
    assert {n for n, r in rows.items() if r["Status"] in ("Leader", "Follower")} == remaining
    assert set(BROKERS) <= {n for n, r in rows.items() if r["Status"] == "Observer"}
    assert rows[7]["DirectoryId"] != "AAAAAAAAAAAAAAAAAAAAAA"
    for broker in BROKERS:  # observers name their directory ids in their Fetch (v17), as Kafka's do
        meta = (cluster.nodes[broker].data_dir / "logs" / "meta.properties").read_text()
        assert f"directory.id={rows[broker]['DirectoryId']}\n" in meta


def test_kafka_tool_adds_and_removes_a_controller(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    """Kafka 4.1.1's kafka-metadata-quorum against pylog: describe --status (through a broker),
    add-controller through the controllers (--bootstrap-controller: DescribeCluster finds the active
    controller), remove-controller through a broker (forwarded to the leader)."""
    from tests.apache_kafka import kafka_tool

    new = cluster.add_controller(8)
    config = controller_properties(new, tmp_path / "controller-8.properties")
    controller = next(n for n in cluster.controller_ids if n != 8 and cluster.nodes[n].running)

    def added() -> bool:
        done = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", cluster.controller_address(controller),
                          "--command-config", str(config), "add-controller")  # fmt: skip
        return done.returncode == 0 and "Added controller 8 with directory id" in done.stdout

    wait_for(added, "kafka-metadata-quorum add-controller 8")
    described = kafka_tool("kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap(), "describe", "--status")
    assert described.returncode == 0, described.stderr
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in described.stdout.splitlines())}
    current = json.loads(fields["CurrentVoters"])
    assert 8 in {v["id"] for v in current}
    eight = next(v for v in current if v["id"] == 8)
    assert eight["endpoints"] == [f"CONTROLLER://{cluster.controller_address(8)}"]

    done = kafka_tool("kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap(), "remove-controller",
                      "--controller-id", "8", "--controller-directory-id", eight["directoryId"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    wait_for(lambda: 8 not in voters(cluster), "controller 8 removed")
    refused = kafka_tool("kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap(), "remove-controller",
                         "--controller-id", "8", "--controller-directory-id", eight["directoryId"])  # fmt: skip
    assert refused.returncode != 0
    assert "VoterNotFoundException" in refused.stdout + refused.stderr
    cluster.stop(8)  # an observer now: stopping it changes no quorum
