"""KIP-853 dynamic quorum in the simulation: a voter is added, then one (the leader) removed.

Real ``RaftCore``s on the simulated lossy network (``tests.sim.cluster``); the invariants of
``tests.sim.invariants`` (one leader per epoch, one vote per epoch, a committed entry never lost or
truncated) are checked after every event while the voter set changes. KIP-853 "Add voter" /
"Remove voter": the new set takes effect when its VotersRecord is appended, one change at a time,
and a leader that removed itself resigns once that change is committed.
"""

from __future__ import annotations

import random
from dataclasses import replace

from broker.raft.log import VoterSpec, VotersRecord
from broker.raft.messages import ErrorCode
from tests.sim.cluster import Cluster
from tests.sim.network import NetworkConfig
from tests.sim.seeds import ci_seeds, run_seeds

LIVENESS_MS = 60_000


def _dynamic_cluster(seed: int, num_voters: int) -> Cluster:
    """``num_voters`` voters from a bootstrap VotersRecord (``storage format --initial-controllers``)
    and one extra node started as an observer."""
    cluster = Cluster(seed, num_voters, 1, network=NetworkConfig.random(_rng(seed), lossy=True))
    bootstrap = VotersRecord(tuple(VoterSpec(v, bytes([v + 1]) * 16) for v in sorted(cluster.voters)))
    for node in cluster.nodes.values():
        node.config = replace(node.config, bootstrap_voters=bootstrap)
    return cluster


def _rng(seed: int) -> random.Random:
    return random.Random(seed * 7919 + 104729)


def _change(cluster: Cluster, operation: str, voter: int) -> int:
    """Ask the current leader until it accepts (it refuses while the new node is not caught up,
    before its first commit, or while a change is pending); returns the record's offset."""
    result_offset: list[int] = []

    def attempt() -> bool:
        leader = cluster.latest_leader()
        if leader is None:
            return False
        node = cluster.nodes[leader]
        assert node.core is not None
        if operation == "add":
            result = node.core.add_voter(VoterSpec(voter, bytes([voter + 1]) * 16), cluster.now_ms)
        else:
            result = node.core.remove_voter(voter, None, cluster.now_ms)
        if result.error_code == ErrorCode.NONE and result.append is not None:
            cluster._execute(node, result.append.step)
            result_offset.append(result.append.last_offset)
            return True
        assert result.error_code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_LEADER_OR_FOLLOWER), result
        cluster.run_for(50)
        return False

    cluster.run_until(attempt, LIVENESS_MS, f"{operation} voter {voter} accepted")
    return result_offset[0]


def _change_committed(cluster: Cluster, operation: str, voter: int) -> int:
    """``_change`` until its record is committed everywhere (a leader change may truncate an
    uncommitted VotersRecord, which Kafka's leader then answers with an error: the tool retries)."""
    for _ in range(20):
        offset = _change(cluster, operation, voter)
        cluster.run_until(lambda o=offset: cluster.all_reached(o + 1), LIVENESS_MS, f"{operation} committed everywhere")
        if isinstance(cluster.invariants.committed[offset].payload, VotersRecord):
            return offset
    cluster.fail(f"{operation} voter {voter} never committed")
    raise AssertionError  # unreachable


def _voters_everywhere(cluster: Cluster, expected: frozenset[int]) -> bool:
    return all(n.core is not None and n.core.voters == expected for n in cluster.running())


@ci_seeds(12)
def test_add_voter_then_remove_the_leader(seeds: list[int]) -> None:
    """3 voters + 1 observer: the observer is added (4 voters), then the active leader removed;
    writes continue throughout and every node converges on the new voter set."""

    def scenario(seed: int) -> None:
        cluster = _dynamic_cluster(seed, 3)
        new = 3
        cluster.start_all()
        cluster.run_until(cluster.has_consistent_leader, LIVENESS_MS, "a consistent leader")
        cluster.run_until(lambda: cluster.any_reached(10), LIVENESS_MS, "high watermark 10")
        _change_committed(cluster, "add", new)
        assert _voters_everywhere(cluster, frozenset({0, 1, 2, 3}))
        old_leader = cluster.latest_leader()
        assert old_leader is not None
        after = frozenset({0, 1, 2, 3}) - {old_leader}
        _change_committed(cluster, "remove", old_leader)
        cluster.run_until(
            lambda: cluster.latest_leader() in after and cluster.has_consistent_leader(), LIVENESS_MS, "new leader"
        )
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, "progress with the new voter set")
        assert _voters_everywhere(cluster, after)
        removed = cluster.nodes[old_leader].core
        assert removed is not None
        assert not removed.is_leader
        assert removed.role in ("observer", "follower")

    run_seeds(seeds, scenario)
