"""KIP-630 snapshots in the simulation: replicas snapshot their state machine and delete their
log prefix; a replica that falls behind the leader's log start (partitioned away, killed, or
wiped) is answered with the SnapshotId, fetches the snapshot with FetchSnapshot in chunks,
installs it and continues with Fetch.

Invariants (``tests.sim.invariants``, after every event): the KIP-595 ones, with a replica's
committed data below its log start held by its durable snapshot; every snapshot written or
installed holds exactly the committed data payloads and the voter set in effect at its end
offset; a log prefix is only deleted below a durable snapshot. ``--seeds 10000`` runs the long
form (as for every simulation scenario).
"""

from __future__ import annotations

import random

from tests.sim.cluster import Cluster
from tests.sim.seeds import ci_seeds, make_cluster, run_seeds

LIVENESS_MS = 90_000


def _snapshot_cluster(
    seed: int, voters: tuple[int, int], observers: tuple[int, int], **options: bool
) -> tuple[Cluster, random.Random]:
    knobs = random.Random(seed * 31 + 7)
    return make_cluster(
        seed,
        voters,
        observers,
        snapshot_every=knobs.randint(4, 30),
        snapshot_chunk_bytes=knobs.choice((2000, 8000, 1 << 20)),
        prefix_delete_probability=knobs.choice((0.3, 0.7, 1.0)),
        **options,
    )


def _leader(cluster: Cluster) -> int:
    leader = cluster.latest_leader()
    if leader is None:
        cluster.fail("no leader")
        raise AssertionError  # unreachable
    return leader


@ci_seeds(24)
def test_snapshots_and_prefix_deletion_with_restarts(seeds: list[int]) -> None:
    """Every replica snapshots and deletes its log prefix while nodes are killed (some torn) and
    restarted from their newest snapshot plus the log tail; the cluster converges."""

    def scenario(seed: int) -> None:
        cluster, rng = _snapshot_cluster(seed, (1, 5), (0, 2))
        cluster.start_all()
        cluster.run_until(lambda: cluster.any_reached(20), LIVENESS_MS, "high watermark 20")
        nodes = sorted(cluster.nodes)
        for _ in range(rng.randint(2, 5)):
            node = rng.choice(nodes)
            if cluster.nodes[node].running:
                cluster.kill(node, torn=rng.random() < 0.5)
            else:
                cluster.start(node)
            cluster.run_for(rng.randint(200, 3000))
        for node in nodes:
            cluster.nodes[node].torn_crash_pending = False
            if not cluster.nodes[node].running:
                cluster.start(node)
        target = len(cluster.invariants.committed) + 20
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"all at {target}")
        if cluster.snapshots_written == 0:
            cluster.fail("no snapshot was written")

    run_seeds(seeds, scenario)


@ci_seeds(24)
def test_partitioned_follower_catches_up_with_fetch_snapshot(seeds: list[int]) -> None:
    """A follower (voter or observer) is isolated, or killed and maybe wiped, until the leader
    has deleted its log past the follower's end; when it comes back it must fetch the snapshot."""

    def scenario(seed: int) -> None:
        cluster, rng = _snapshot_cluster(seed, (3, 5), (0, 2), lossy=rng_lossy(seed))
        cluster.prefix_delete_probability = 1.0
        cluster.start_all()
        cluster.run_until(cluster.has_consistent_leader, LIVENESS_MS, "a consistent leader")
        cluster.run_until(lambda: cluster.any_reached(5), LIVENESS_MS, "high watermark 5")
        cluster.run_until(lambda: cluster.latest_leader() is not None, LIVENESS_MS, "a leader")
        leader = _leader(cluster)
        victim = rng.choice([n for n in sorted(cluster.nodes) if n != leader])
        how = rng.choice(("isolate", "kill", "wipe"))
        if how == "isolate":
            cluster.network.isolate(victim, cluster.nodes)
            cluster.run_for(2_000)  # messages in flight when it was cut off land meanwhile
        elif how == "kill":
            cluster.kill(victim)
        else:
            cluster.invariants.check_majority = False  # a wiped voter no longer holds what it held
            cluster.kill_and_wipe(victim)

        def leader_deleted_past_victim() -> bool:
            current = cluster.latest_leader()
            # the victim's log end now: responses already in flight when it was cut off still land
            victim_end = cluster.nodes[victim].disk.volatile_end
            return current is not None and cluster.nodes[current].disk.log_start > victim_end

        cluster.run_until(leader_deleted_past_victim, LIVENESS_MS, "the leader's log start past the victim")
        installed_before = cluster.nodes[victim].disk.installed
        leader_now = _leader(cluster)
        epoch_now = cluster.nodes[leader_now].core.epoch  # type: ignore[union-attr]
        if how == "isolate":
            cluster.network.heal()
        else:
            cluster.start(victim)
        target = len(cluster.invariants.committed) + 10
        cluster.run_until(lambda: cluster.all_reached(target), LIVENESS_MS, f"all at {target}")
        # Unless another leader (whose log may still hold the prefix) took over meanwhile, the
        # victim can only have caught up by fetching a snapshot.
        leader_core = cluster.nodes[leader_now].core
        same_epoch = leader_core is not None and leader_core.epoch == epoch_now
        same_leader = cluster.latest_leader() == leader_now and same_epoch
        if same_leader and cluster.nodes[victim].disk.installed <= installed_before:
            cluster.fail(f"node {victim} caught up without fetching a snapshot")

    run_seeds(seeds, scenario)


def rng_lossy(seed: int) -> bool:
    return random.Random(seed * 13 + 1).random() < 0.5
