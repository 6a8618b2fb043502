"""The state-change log across a real leader change (issue #32 "Logs"; Kafka's
``state.change.logger``): on a 3-node KRaft cluster with ``log.format=json``, stopping a
partition's leader makes the active controller log the election (leader, leader epoch, ISR and
partition epoch, old and new) and the new leader log that it leads at the new epoch."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import wait_for

NODES = (1, 2, 3)
OVERRIDES = {
    "log.format": "json",
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(
        tmp_path_factory.mktemp("state-change"), brokers=NODES, combined=True, overrides=OVERRIDES
    ) as running:
        yield running


def state_changes(cluster: EmbeddedCluster, topic: str) -> list[dict[str, object]]:
    """Every node's state-change lines about ``topic`` (from the files its output goes to)."""
    out = []
    for node in cluster.nodes.values():
        path = Path(node.data_dir) / "broker.out"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        for line in text.splitlines():
            if line.startswith("{") and '"state.change.logger"' in line:
                obj = json.loads(line)
                if obj.get("topic") == topic:
                    out.append(obj)
    return out


def test_a_leader_change_is_logged_by_the_controller_and_the_new_leader(cluster: EmbeddedCluster) -> None:
    topic = f"moves-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    first = wait_for(lambda: cluster.partitions(topic).get(0), "the topic in the metadata")
    victim = first.leader
    survivor = next(n for n in NODES if n != victim)
    created = wait_for(
        lambda: [o for o in state_changes(cluster, topic) if o.get("role") == "leader" and o["node_id"] == victim],
        "the first leader's state-change line",
    )
    assert created[0]["leader_epoch"] == first.leader_epoch

    cluster.stop(victim)
    moved = wait_for(
        lambda: (p := cluster.partitions(topic, via=survivor)[0]).leader not in (-1, victim) and p,
        "a new leader",
    )
    new_leader, epoch = moved.leader, moved.leader_epoch
    assert epoch > first.leader_epoch

    def election() -> list[dict[str, object]]:
        return [o for o in state_changes(cluster, topic)
                if "controller" in o and o["previous_leader"] == victim and o["leader"] == new_leader]  # fmt: skip

    decided = wait_for(election, "the controller's line of the election")[0]
    assert decided["leader_epoch"] == epoch
    assert decided["previous_leader_epoch"] == first.leader_epoch
    assert victim not in decided["isr"]  # the stopped broker left the ISR in the same change
    assert decided["partition_epoch"] > 0
    assert f"leader {victim} -> {new_leader}" in str(decided["message"])

    def applied() -> list[dict[str, object]]:
        return [o for o in state_changes(cluster, topic)
                if o.get("role") == "leader" and o["node_id"] == new_leader and o["leader_epoch"] == epoch]  # fmt: skip

    line = wait_for(applied, "the new leader's state-change line")[0]
    assert line["previous_leader"] == victim
    assert line["isr"] == decided["isr"]
    assert line["partition_epoch"] == decided["partition_epoch"]
    assert f"[Broker id={new_leader}] Leader {topic}-0 at leader epoch {epoch}" in str(line["message"])
