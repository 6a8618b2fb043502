"""KIP-630 metadata snapshots on a 3-node KRaft cluster (combined broker,controller nodes).

With small thresholds (``metadata.log.max.record.bytes.between.snapshots``, and
``metadata.max.retention.bytes=0`` so the log below the newest snapshot goes at once), metadata
records from topic creations, deletions and config changes make every node write
``<endOffset>-<epoch>.checkpoint`` files and delete its metadata log prefix (the log file is then
named after its new start offset). A node restarted afterwards loads the newest snapshot, replays
only the tail, and serves the same topics, configs and ACLs as before. A node whose metadata log
directory is wiped (``meta.properties`` kept) is behind the leader's log start when it comes
back: the leader answers its Fetch with the SnapshotId and it catches up with FetchSnapshot (59).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from broker.raft.snapshot import parse_snapshot_file_name
from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import wait_for

NODES = (1, 2, 3)
OVERRIDES = {
    "metadata.log.max.record.bytes.between.snapshots": "4096",
    "metadata.max.retention.bytes": "0",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path_factory.mktemp("snapshots"), brokers=NODES, combined=True, overrides=OVERRIDES) as c:
        yield c


def metadata_dir(cluster: EmbeddedCluster, node: int) -> Path:
    return cluster.nodes[node].data_dir / "logs" / "__cluster_metadata-0"


def snapshot_ends(cluster: EmbeddedCluster, node: int) -> list[int]:
    ids = (parse_snapshot_file_name(p.name) for p in metadata_dir(cluster, node).iterdir())
    return sorted(i.end_offset for i in ids if i is not None)


def log_start(cluster: EmbeddedCluster, node: int) -> int:
    bases = [int(p.name[:20]) for p in metadata_dir(cluster, node).glob("*.log")]
    return max(bases) if bases else -1


def acls(address: str) -> set[tuple[str, str, int]]:
    """(resource name, principal, operation) of every ACL the node reports."""
    admin = AdminClient({"bootstrap.servers": address})
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    return {(b.name, b.principal, int(b.operation.value)) for b in admin.describe_acls(everything).result(timeout=30)}


def view(address: str, names: list[str]) -> dict[str, tuple[int, str | None]]:
    """topic -> (partition count, retention.ms as DescribeConfigs reports it) for ``names``."""
    admin = AdminClient({"bootstrap.servers": address})
    meta = admin.list_topics(timeout=30)
    out: dict[str, tuple[int, str | None]] = {}
    present = [n for n in names if n in meta.topics]
    if present:
        futures = admin.describe_configs([ConfigResource("topic", n) for n in present])
        for resource, future in futures.items():
            configs = future.result(timeout=30)
            entry = configs.get("retention.ms")
            out[resource.name] = (len(meta.topics[resource.name].partitions), entry.value if entry else None)
    return out


def test_snapshots_written_log_prefix_deleted_and_restarts_load_them(cluster: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    prefix = f"snap-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i}" for i in range(24)]
    for i in range(0, len(names), 6):
        chunk = [NewTopic(n, 2, 3, config={"retention.ms": str(1000 * (i + 7))}) for n in names[i : i + 6]]
        for future in admin.create_topics(chunk, operation_timeout=30).values():
            future.result(timeout=60)
    deleted = names[::4]
    for future in admin.delete_topics(deleted, operation_timeout=30).values():
        future.result(timeout=60)
    kept = [n for n in names if n not in deleted]
    altered = kept[0]
    bindings = [
        AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, f"User:u{i}", "*", AclOperation.READ,
                   AclPermissionType.ALLOW)
        for i, name in enumerate(kept[:5])
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(timeout=60)
    admin.incremental_alter_configs(
        [ConfigResource("topic", altered, incremental_configs=[_set("retention.ms", "123456")])]
    )[ConfigResource("topic", altered)].result(timeout=60)

    def snapshotted_everywhere() -> bool:
        return all(snapshot_ends(cluster, n) and log_start(cluster, n) > 0 for n in NODES)

    wait_for(snapshotted_everywhere, "a snapshot and a deleted log prefix on every node")
    for node in NODES:
        assert log_start(cluster, node) <= max(snapshot_ends(cluster, node))

    expected = wait_for(lambda: (v := view(cluster.address(1), kept)) and len(v) == len(kept) and v, "the view")
    assert expected[altered][1] == "123456"
    assert not set(view(cluster.address(1), deleted))
    expected_acls = wait_for(lambda: (a := acls(cluster.address(1))) and len(a) == len(bindings) and a, "the ACLs")

    def whole(node: int) -> bool:
        return view(cluster.address(node), kept) == expected and acls(cluster.address(node)) == expected_acls

    for node in (2, 3):  # each is a broker and a controller (combined)
        cluster.restart(node)
        wait_for(lambda n=node: whole(n), f"node {node}'s image after restart")
        assert not set(view(cluster.address(node), deleted))

    # Wipe node 3's metadata log dir (meta.properties stays in the log dir above it).
    cluster.stop(3)
    shutil.rmtree(metadata_dir(cluster, 3))
    cluster.nodes[3].start()
    wait_for(lambda: whole(3), "node 3's image from a fetched snapshot")
    assert snapshot_ends(cluster, 3), "node 3 installed the leader's snapshot"
    assert log_start(cluster, 3) >= min(snapshot_ends(cluster, 3))


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
