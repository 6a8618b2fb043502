"""KIP-595 "Test Plan": *the primary way to test the implementation is discrete event simulation
(DES): many deterministically generated random scenarios with faults such as network partitions,
with system invariants checked after each step of the simulation.*

Scenarios follow Kafka's ``RaftEventSimulationTest``; every one runs the real ``RaftCore`` on a
lossy, reordering, duplicating network with 1-5 voters and observers, and checks the invariants of
``tests.sim.invariants`` after every event. A failure message starts with ``seed=N``; rerun it
alone with ``pytest tests/sim --seed N``.
"""

from __future__ import annotations

import random

from tests.sim.cluster import Cluster
from tests.sim.seeds import ci_seeds, make_cluster, run_seeds

LIVENESS_MS = 60_000


def _seed_data(cluster: Cluster, entries: int = 10) -> None:
    cluster.start_all()
    cluster.run_until(cluster.has_consistent_leader, LIVENESS_MS, "a consistent leader")
    cluster.run_until(lambda: cluster.any_reached(entries), LIVENESS_MS, f"high watermark {entries}")


def _leader(cluster: Cluster) -> int:
    leader = cluster.latest_leader()
    if leader is None:
        cluster.fail("no leader")
        raise AssertionError  # unreachable
    return leader


def _kill_all(cluster: Cluster, rng: random.Random) -> None:
    """Kill every node; some die part-way through their next step (torn persist)."""
    torn = []
    for node in cluster.running():
        if rng.random() < 0.5:
            cluster.kill(node.node_id, torn=True)
            torn.append(node.node_id)
        else:
            cluster.kill(node.node_id)
    cluster.run_until(lambda: not cluster.running(torn), LIVENESS_MS, "torn crashes")


@ci_seeds(48)
def test_initial_election(seeds: list[int]) -> None:
    """1-5 voters and 0-3 observers elect a leader, and every node reaches the high watermark."""

    def scenario(seed: int) -> None:
        cluster, _ = make_cluster(seed, (1, 5), (0, 3))
        cluster.start_all()
        cluster.run_until(cluster.has_consistent_leader, LIVENESS_MS, "a consistent leader")
        cluster.run_until(lambda: cluster.all_reached(10), LIVENESS_MS, "all at high watermark 10")

    run_seeds(seeds, scenario)


@ci_seeds(48)
def test_new_leader_after_leader_failure(seeds: list[int]) -> None:
    """The leader is killed (hard, torn, or gracefully with EndQuorumEpoch); a new leader makes
    progress; the old leader restarts and catches up."""

    def scenario(seed: int) -> None:
        cluster, rng = make_cluster(seed, (3, 5), (0, 3))
        _seed_data(cluster)
        leader = _leader(cluster)
        how = rng.choice(("graceful", "hard", "torn"))
        if how == "graceful":
            cluster.shutdown(leader)
        else:
            cluster.kill(leader, torn=how == "torn")
            cluster.run_until(lambda: not cluster.nodes[leader].running, LIVENESS_MS, "leader down")
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"survivors at {target}")
        cluster.start(leader)
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"all at {target}")

    run_seeds(seeds, scenario)


@ci_seeds(40)
def test_recover_after_all_nodes_killed(seeds: list[int]) -> None:
    """Every node dies (unflushed data is lost); a majority restarts and makes progress."""

    def scenario(seed: int) -> None:
        cluster, rng = make_cluster(seed, (1, 5), (0, 3))
        _seed_data(cluster)
        _kill_all(cluster, rng)
        majority = rng.sample(sorted(cluster.voters), len(cluster.voters) // 2 + 1)
        observers = [n for n in cluster.nodes if n not in cluster.voters]
        for node_id in majority + observers:
            cluster.start(node_id)
        target = len(cluster.invariants.committed) + 10
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"restarted nodes at {target}")

    run_seeds(seeds, scenario)


@ci_seeds(40)
def test_new_leader_after_leader_partitioned_away(seeds: list[int]) -> None:
    """The leader is cut off: the others elect a new leader and progress; the zombie leader stops
    being leader (leader progress timeout); after healing it follows and catches up."""

    def scenario(seed: int) -> None:
        cluster, _ = make_cluster(seed, (3, 5), (0, 3))
        _seed_data(cluster)
        old = _leader(cluster)
        cluster.network.isolate(old, cluster.nodes)
        others = [n for n in cluster.nodes if n != old]
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.all_reached(target, others), LIVENESS_MS, f"majority side at {target}")
        old_core = cluster.nodes[old].core
        cluster.run_until(
            lambda: old_core is not None and not old_core.is_leader,
            cluster.nodes[old].config.fetch_timeout_ms + 100,
            "the partitioned (zombie) leader resigning",
        )
        cluster.network.heal()
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"all at {target} after heal")

    run_seeds(seeds, scenario)


@ci_seeds(40)
def test_progress_with_only_a_majority_reachable(seeds: list[int]) -> None:
    """Five voters split 2 | 3: only the side with a majority commits; after healing all agree."""

    def scenario(seed: int) -> None:
        cluster, rng = make_cluster(seed, (5, 5), (0, 3))
        _seed_data(cluster)
        minority, majority = [0, 1], [2, 3, 4]
        for observer in (n for n in cluster.nodes if n not in cluster.voters):
            rng.choice((minority, majority)).append(observer)
        cluster.network.partition(minority, majority)
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.max_high_watermark(majority) >= target, LIVENESS_MS, "majority commits")
        if cluster.max_high_watermark(minority) >= cluster.max_high_watermark(majority):
            cluster.fail("the minority side kept pace with the majority")
        cluster.network.heal()
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"all at {target} after heal")

    run_seeds(seeds, scenario)


@ci_seeds(40)
def test_progress_after_back_to_back_leader_failures(seeds: list[int]) -> None:
    """Leader 1 is cut off; as soon as leader 2 is elected, 1 returns and 2 is cut off."""

    def scenario(seed: int) -> None:
        cluster, _ = make_cluster(seed, (3, 5), (0, 3))
        _seed_data(cluster)
        first = _leader(cluster)
        cluster.network.isolate(first, cluster.nodes)
        cluster.run_until(lambda: cluster.latest_leader() not in (None, first), LIVENESS_MS, "a second leader")
        second = _leader(cluster)
        cluster.network.reconnect(first)
        cluster.network.isolate(second, cluster.nodes)
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.any_reached(target), LIVENESS_MS, f"progress to {target}")

    run_seeds(seeds, scenario)


@ci_seeds(40)
def test_recover_from_single_node_committed_data_loss(seeds: list[int]) -> None:
    """One node loses its whole disk (committed data included). While a majority still holds the
    committed data durably, Raft must lose nothing: a new leader is elected without it, and the
    restarted empty node catches up.

    As in Kafka's version, the "a majority durably holds the committed prefix" invariant is off
    after the wipe: a Fetch the node sent before losing its disk may still reach the leader and
    count towards the high watermark. The network is lossless here, so no further election
    compounds the disk loss."""

    def scenario(seed: int) -> None:
        cluster, rng = make_cluster(seed, (3, 5), (0, 2), lossy=False)
        _seed_data(cluster)

        def stable() -> bool:
            committed = cluster.invariants.committed
            return cluster.has_consistent_leader() and all(
                cluster.nodes[v].disk.durable_log[: len(committed)] == committed for v in cluster.voters
            )

        cluster.run_until(stable, LIVENESS_MS, "committed data on every voter")
        victim = rng.choice(sorted(cluster.nodes))
        cluster.invariants.check_majority = False
        cluster.kill_and_wipe(victim)
        cluster.run_until(
            lambda: cluster.has_consistent_leader() and cluster.latest_leader() != victim,
            LIVENESS_MS,
            "a leader other than the wiped node",
        )
        cluster.start(victim)
        target = cluster.max_high_watermark() + 10
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"all at {target}")

    run_seeds(seeds, scenario)


@ci_seeds(48)
def test_random_faults_then_heal(seeds: list[int]) -> None:
    """Random kills (some torn), restarts, partitions, isolations and heals; then everything heals
    and restarts, and the cluster must converge and make progress. Invariants hold throughout."""

    def scenario(seed: int) -> None:
        cluster, rng = make_cluster(seed, (1, 5), (0, 2))
        cluster.start_all()
        nodes = sorted(cluster.nodes)
        for _ in range(rng.randint(4, 10)):
            action = rng.choice(("kill", "kill", "restart", "restart", "partition", "isolate", "heal"))
            node = rng.choice(nodes)
            if action == "kill" and cluster.nodes[node].running:
                cluster.kill(node, torn=rng.random() < 0.5)
            elif action == "restart" and not cluster.nodes[node].running:
                cluster.start(node)
            elif action == "partition":
                side = rng.sample(nodes, rng.randint(1, len(nodes)))
                cluster.network.partition(side, [n for n in nodes if n not in side])
            elif action == "isolate":
                cluster.network.isolate(node, nodes)
            elif action == "heal":
                cluster.network.heal()
            cluster.run_for(rng.randint(100, 3000))
        cluster.network.heal()
        for node in nodes:
            cluster.nodes[node].torn_crash_pending = False
            if not cluster.nodes[node].running:
                cluster.start(node)
        cluster.run_until(cluster.has_consistent_leader, LIVENESS_MS, "a consistent leader after healing")
        target = len(cluster.invariants.committed) + 5
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"all at {target}")

    run_seeds(seeds, scenario)
