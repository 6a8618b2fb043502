"""``RaftDriver`` over real loopback sockets: election, replication, commit, failover, restart,
graceful resignation, observers and fatal cluster-id mismatches (KIP-595, run for real)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from broker.raft.core import NotLeaderError
from broker.raft.driver import RaftDriver
from broker.raft.log import LeaderChange
from broker.raft.store import QUORUM_STATE_FILE, MetadataLog
from tests.integration.raft_driver_harness import Node, leaders, start_cluster, stop_all
from tests.waiting import wait_until_async


def quorum_state(node: Node) -> dict:
    return json.loads((node.dir / QUORUM_STATE_FILE).read_text())


async def elected(nodes: dict[int, Node], other_than: int = -1) -> int:
    """Wait until every running replica knows the same leader (not ``other_than``)."""
    await wait_until_async(
        lambda: len(leaders(nodes)) == 1 and not leaders(nodes) & {-1, other_than}, what="one leader known to all"
    )
    return next(iter(leaders(nodes)))


def driver(node: Node) -> RaftDriver:
    assert node.driver is not None
    return node.driver


def test_three_voters_elect_one_leader_and_persist_it(tmp_path: Path) -> None:
    """The elected leader appends LeaderChange first; every voter's quorum-state names it."""

    async def scenario() -> None:
        nodes = await start_cluster(tmp_path, (1, 2, 3))
        try:
            leader = await elected(nodes)
            epoch = driver(nodes[leader]).epoch
            await wait_until_async(lambda: all(driver(n).high_watermark >= 1 for n in nodes.values()), what="commit")
            for node in nodes.values():
                state = quorum_state(node)
                assert (state["leaderId"], state["leaderEpoch"]) == (leader, epoch)
                first = driver(node).core.log.entry(0)
                assert isinstance(first.payload, LeaderChange)
                assert first.payload.leader_id == leader
        finally:
            await stop_all(nodes)

    asyncio.run(scenario())


def test_append_resolves_once_committed_and_listeners_see_it_everywhere(tmp_path: Path) -> None:
    """KIP-595 "Client Interactions": an append returns once the high watermark passes it."""

    async def scenario() -> None:
        nodes = await start_cluster(tmp_path, (1, 2, 3), observers=(4,))
        try:
            leader = await elected(nodes)
            follower = next(i for i in (1, 2, 3) if i != leader)
            with pytest.raises(NotLeaderError) as info:
                await driver(nodes[follower]).append([b"nope"])
            assert info.value.leader_id == leader
            last = await driver(nodes[leader]).append([b"a", b"b"])
            assert driver(nodes[leader]).high_watermark > last
            assert (last - 1, b"a") in nodes[leader].committed
            last = await driver(nodes[leader]).append([b"c"])
            expected = [(last - 2, b"a"), (last - 1, b"b"), (last, b"c")]
            assert nodes[leader].committed == expected
            await wait_until_async(lambda: all(n.committed == expected for n in nodes.values()), what="replication")
            assert driver(nodes[4]).core.role == "observer"
            assert driver(nodes[4]).leader_id == leader
        finally:
            await stop_all(nodes)

    asyncio.run(scenario())


def test_leader_failure_elects_a_new_leader_in_a_higher_epoch(tmp_path: Path) -> None:
    async def scenario() -> None:
        nodes = await start_cluster(tmp_path, (1, 2, 3))
        try:
            old = await elected(nodes)
            old_epoch = driver(nodes[old]).epoch
            await driver(nodes[old]).shutdown(graceful=False)
            await nodes[old].stop_listening()
            rest = {i: n for i, n in nodes.items() if i != old}
            new = await elected(rest, other_than=old)
            assert new != old
            assert driver(nodes[new]).epoch > old_epoch
            assert await driver(nodes[new]).append([b"after failover"]) >= 1
        finally:
            await stop_all(nodes)

    asyncio.run(scenario())


def test_graceful_resignation_hands_over_through_end_quorum_epoch(tmp_path: Path) -> None:
    """With a fetch timeout far beyond the test's patience, only EndQuorumEpoch can make a
    follower start the election: the preferred successor does so at once."""

    async def scenario() -> None:
        nodes = await start_cluster(tmp_path, (1, 2, 3), fetch_timeout_ms=600_000)
        try:
            old = await elected(nodes)
            old_epoch = driver(nodes[old]).epoch
            await wait_until_async(lambda: all(driver(n).high_watermark >= 1 for n in nodes.values()), what="commit")
            await driver(nodes[old]).shutdown(graceful=True)
            await nodes[old].stop_listening()
            rest = {i: n for i, n in nodes.items() if i != old}
            new = await elected(rest, other_than=old)
            assert new != old
            assert driver(nodes[new]).epoch > old_epoch
        finally:
            await stop_all(nodes)

    asyncio.run(scenario())


def test_restarted_voter_replays_committed_entries_and_keeps_its_vote(tmp_path: Path) -> None:
    """The committed prefix is replayed to listeners at start-up, each entry once; the vote
    recorded in quorum-state survives the restart (one vote per epoch)."""

    async def scenario() -> None:
        nodes = await start_cluster(tmp_path, (1, 2, 3))
        try:
            leader = await elected(nodes)
            await driver(nodes[leader]).append([b"x", b"y"])
            follower = next(i for i in (1, 2, 3) if i != leader)
            node = nodes[follower]
            await wait_until_async(lambda: len(node.committed) == 2, what="follower commit")
            before = quorum_state(node)
            await driver(node).shutdown(graceful=False)
            ports = {i: n.port for i, n in nodes.items()}
            restarted = node.make_driver(ports)
            await restarted.start()
            after_start = restarted.core.quorum_state_data()
            assert after_start.leader_epoch >= before["leaderEpoch"]
            if after_start.leader_epoch == before["leaderEpoch"]:
                assert after_start.voted_id in (before["votedId"], -1) or before["votedId"] == -1
            await wait_until_async(lambda: [p for _, p in node.committed] == [b"x", b"y"], what="replay or catch-up")
            await driver(nodes[leader]).append([b"z"])
            await wait_until_async(lambda: [p for _, p in node.committed] == [b"x", b"y", b"z"], what="new entry")
        finally:
            await stop_all(nodes)

    asyncio.run(scenario())


def test_cluster_id_mismatch_with_the_elected_leader_is_fatal(tmp_path: Path) -> None:
    """KIP-595 "Cluster Bootstrapping": a BeginQuorumEpoch or Fetch answer from an elected leader
    with another cluster id stops the replica; Vote refusals alone do not."""

    async def scenario() -> None:
        nodes = {i: Node(i, tmp_path) for i in (1, 2, 3)}
        for node in nodes.values():
            await node.listen()
        ports = {i: n.port for i, n in nodes.items()}
        nodes[1].make_driver(ports)
        nodes[2].make_driver(ports)
        nodes[3].make_driver(ports, cluster_id="another-cluster")
        for node in nodes.values():
            await driver(node).start()
        try:
            await wait_until_async(lambda: bool(nodes[3].fatal), what="the fatal error")
            assert "INCONSISTENT_CLUSTER_ID" in nodes[3].fatal[0]
            assert not driver(nodes[3]).running
            good = {1: nodes[1], 2: nodes[2]}
            await elected(good)
        finally:
            await stop_all(nodes)

    asyncio.run(scenario())


def test_describe_quorum_from_any_replica_and_metrics(tmp_path: Path) -> None:
    async def scenario() -> None:
        nodes = await start_cluster(tmp_path, (1, 2, 3), observers=(4,))
        try:
            leader = await elected(nodes)
            await wait_until_async(lambda: driver(nodes[4]).leader_id == leader, what="observer finds the leader")
            await driver(nodes[leader]).append([b"m"])
            await wait_until_async(lambda: driver(nodes[4]).high_watermark >= 2, what="observer catch-up")
            for node in nodes.values():
                body = await driver(node).describe_quorum_anywhere()
                partition = body["topics"][0]["partitions"][0]
                assert (partition["error_code"], partition["leader_id"]) == (0, leader)
                assert [v["replica_id"] for v in partition["current_voters"]] == [1, 2, 3]
            metrics = driver(nodes[leader]).metrics()
            assert metrics["current-state"] == "leader"
            assert metrics["current-leader"] == leader
            assert metrics["high-watermark"] >= 2
            assert metrics["commit-latency-max"] >= 0
            assert 0 <= metrics["poll-idle-ratio-avg"] <= 1
            assert driver(nodes[4]).metrics()["current-state"] == "observer"
        finally:
            await stop_all(nodes)

    asyncio.run(scenario())


def test_single_voter_commits_alone_and_the_log_is_on_disk(tmp_path: Path) -> None:
    async def scenario() -> None:
        nodes = await start_cluster(tmp_path, (1,))
        node = nodes[1]
        try:
            await wait_until_async(lambda: driver(node).is_leader, what="self-election")
            assert await driver(node).append([b"only"]) == 1
        finally:
            await stop_all(nodes)
        stored = MetadataLog(node.dir, lambda: 0)
        assert [e.payload for e in stored.open()][1:] == [b"only"]
        stored.close()

    asyncio.run(scenario())
