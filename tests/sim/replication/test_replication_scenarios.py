"""Seeded simulation of partition replication (issue 11 "Done when", issue 12 sim item).

Kafka documentation §4.7 "Replication": "A message is considered committed when all in sync replicas for that
partition have
applied it to their log", and "the guarantee that Kafka offers is that a committed message will not
be lost, as long as there is at least one in sync replica alive"; Kafka documentation §5.4.4 "Guarantees": a
replica never
keeps data that appears on no other. Every scenario runs 2-5 brokers holding 1-3 partitions
(replication factor up to 3) on a lossy, delaying network, with producers appending with acks=1
and acks=all, and checks ``tests.sim.replication.invariants`` after every event; after the faults
stop, every replica must converge to the leader's log with the ISR back to all replicas within
``LIVENESS_MS`` of simulated time. A failure message starts with ``seed=N``; rerun it alone with
``pytest tests/sim/replication --seed N``; ``--seeds N`` runs N seeds of every scenario.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest

from broker.controller.partition_changes import IsrChange
from tests.sim.replication.model import CONTROLLER, TOPIC, SimConfig, Simulation
from tests.sim.seeds import ci_seeds, run_seeds

pytestmark = pytest.mark.sim

LIVENESS_MS = 30_000


@dataclass(frozen=True, slots=True)
class Faults:
    """What the chaos loop may do, and how often."""

    interval_ms: tuple[int, int] = (200, 1500)
    pause: bool = False
    process_crash: bool = False
    machine_crash: bool = False
    isolate: bool = False
    followers_only: bool = False  # never touch a current partition leader
    max_faulty: int = 1  # brokers down, paused or cut off at once
    restart_after_session_timeout: bool = True  # the controller fences a crashed broker first
    down_ms: tuple[int, int] = (100, 3000)


def _simulation(seed: int, *, brokers: tuple[int, int] = (3, 3), partitions: int | None = None) -> Simulation:
    rng = random.Random(seed * 7919 + 104729)  # a stream apart from the simulation's own
    config = SimConfig.random(rng, brokers=brokers)
    if partitions is not None:
        config = replace(config, partitions=partitions)
    return Simulation(seed, config)


def _leaders(sim: Simulation) -> set[int]:
    return {p.leader for p in sim.controller.state.topics[TOPIC].partitions.values()}


def _chaos(sim: Simulation, faults: Faults, duration_ms: int) -> None:
    """Inject faults for ``duration_ms``, then stop them all (heal, resume, restart)."""
    rng = random.Random(sim.rng.getrandbits(64))
    faulty: dict[int, tuple[Callable[[], None], int]] = {}  # broker -> (how it recovers, not before)
    end = sim.now_ms + duration_ms
    kinds = [k for k in ("pause", "process_crash", "machine_crash", "isolate") if getattr(faults, k)]
    cfg = sim.config

    def recover(broker: int) -> None:
        fault = faulty.pop(broker, None)
        if fault is not None:
            fault[0]()

    def inject() -> None:
        if sim.now_ms >= end:
            return
        sim.after(None, rng.randint(*faults.interval_ms), inject)
        candidates = [b for b in sorted(sim.brokers) if b not in faulty]
        if faults.followers_only:
            candidates = [b for b in candidates if b not in _leaders(sim)]
        if not candidates or len(faulty) >= faults.max_faulty or not kinds:
            return
        broker = rng.choice(candidates)
        kind = rng.choice(kinds)
        down = rng.randint(*faults.down_ms)
        if kind == "pause":
            sim.pause(broker)
            faulty[broker] = (lambda: sim.resume(broker), 0)
        elif kind in ("process_crash", "machine_crash"):
            sim.crash(broker, machine=kind == "machine_crash")
            earliest = 0
            if faults.restart_after_session_timeout:
                down = max(down, cfg.session_timeout_ms + cfg.heartbeat_interval_ms * 3 + 500)
                earliest = sim.now_ms + down
            faulty[broker] = (lambda: sim.restart(broker), earliest)
        else:
            how = rng.choice(("all", "controller", "peers"))
            sim.isolate(broker, from_controller=how != "peers", from_peers=how != "controller")
            sim.trace(f"broker {broker} cut off from {how}")

            def heal() -> None:
                for pair in [p for p in sim.cut if broker in p or (CONTROLLER in p and broker in p)]:
                    sim.cut.discard(pair)
                sim.trace(f"broker {broker} reconnected")

            faulty[broker] = (heal, 0)
        sim.after(None, down, lambda: recover(broker))

    sim.after(None, rng.randint(*faults.interval_ms), inject)
    sim.run_for(duration_ms)
    # the faults stop: crashed brokers restart as soon as their (session-expiry) delay allows
    last = max((earliest for _, earliest in faulty.values()), default=0)
    if last > sim.now_ms:
        for broker in [b for b, (_, earliest) in faulty.items() if not earliest]:
            recover(broker)
        sim.run_for(last - sim.now_ms)
    for broker in list(faulty):
        recover(broker)


def _converge(sim: Simulation) -> None:
    """Liveness: once faults stop (and producers with them), every replica holds the leader's log,
    the ISR is all replicas and the high watermark is the log end, within LIVENESS_MS."""
    sim.producing = False
    try:
        sim.run_until(sim.converged, LIVENESS_MS, "convergence after the faults stopped")
    except AssertionError as exc:
        raise type(exc)(f"{exc}\n  state:\n{sim.describe()}") from None
    for partition, acked in sim.invariants.acked.items():
        part = sim.controller.state.topics[TOPIC].partitions[partition]
        entries = sim.brokers[part.leader].partitions[partition].log.entries
        lost = sorted(o for o, (record_id, _) in acked.items() if o >= len(entries) or entries[o][1] != record_id)
        if lost:
            sim.fail(f"acks=all records lost after convergence: p{partition} offsets {lost[:10]} ({len(lost)})")


def _run(seed: int, faults: Faults, *, duration_ms: int = 6000, brokers: tuple[int, int] = (3, 3),
         partitions: int | None = None, setup: Callable[[Simulation], None] | None = None) -> Simulation:  # fmt: skip
    sim = _simulation(seed, brokers=brokers, partitions=partitions)
    if setup is not None:
        setup(sim)
    sim.run_for(200)
    _chaos(sim, faults, duration_ms)
    _converge(sim)
    return sim


@ci_seeds(48)
def test_replication_over_a_lossy_network(seeds: list[int]) -> None:
    """No broker faults: delays, reordering across connections, drops and duplicated controller
    requests only. acks=all writes are acknowledged and every replica ends identical."""
    run_seeds(seeds, lambda seed: _run(seed, Faults(), brokers=(2, 5), duration_ms=3000))


@ci_seeds(40)
def test_follower_stalls(seeds: list[int]) -> None:
    """Followers pause (SIGSTOP) for up to several replica.lag.time.max.ms: they leave the ISR, the
    leader keeps acknowledging with the rest, and they rejoin after they catch up."""
    faults = Faults(pause=True, followers_only=True, down_ms=(50, 3000), max_faulty=2)
    run_seeds(seeds, lambda seed: _run(seed, faults, partitions=1))


@ci_seeds(40)
def test_follower_restarts(seeds: list[int]) -> None:
    """Followers crash (the page cache survives) and restart, quickly or after their session
    expired; they truncate where they diverge and rejoin the ISR."""
    faults = Faults(process_crash=True, pause=True, followers_only=True, restart_after_session_timeout=False)
    run_seeds(seeds, lambda seed: _run(seed, faults, partitions=1))


@ci_seeds(56)
def test_leader_failover_with_crashes(seeds: list[int]) -> None:
    """Any broker, leaders included, pauses or crashes (process crash, or machine crash losing its
    unflushed tail) and restarts once its session expired; the controller fences it and elects a new
    leader from the ISR (issue 12). No acks=all record is lost and replicas agree below the HW."""
    faults = Faults(pause=True, process_crash=True, machine_crash=True, max_faulty=1)
    run_seeds(seeds, lambda seed: _run(seed, faults, brokers=(2, 5)))


@ci_seeds(40)
def test_leaders_restart_within_their_session_after_crashes(seeds: list[int]) -> None:
    """Any broker, leaders included, crashes (process or machine crash) and its new process
    registers before the old session expired: the controller fences the old incarnation in the same
    entry (``register_broker``), so a leader that lost its unflushed tail follows, truncates and
    rejoins instead of leading on at its old epoch (defect 1 above, now in random scenarios)."""
    faults = Faults(
        pause=True, process_crash=True, machine_crash=True, max_faulty=1, restart_after_session_timeout=False
    )
    run_seeds(seeds, lambda seed: _run(seed, faults, brokers=(2, 5)))


@ci_seeds(40)
def test_network_partitions(seeds: list[int]) -> None:
    """A broker is cut off from the controller, from its peers, or from both (a zombie leader
    keeps running until the metadata reaches it); links heal later."""
    faults = Faults(isolate=True, pause=True, max_faulty=1)
    run_seeds(seeds, lambda seed: _run(seed, faults, brokers=(3, 5)))


@ci_seeds(24)
def test_two_faults_at_once(seeds: list[int]) -> None:
    """Up to two brokers faulty at once, any fault (pause, process or machine crash with a restart
    after the session expired, cut links). With replication factor 2 or 3 this includes every ISR
    member losing its tail (an allowed loss, counted) and the ISR shrinking to a replica that then
    crashes."""
    faults = Faults(pause=True, process_crash=True, machine_crash=True, isolate=True, max_faulty=2)
    run_seeds(seeds, lambda seed: _run(seed, faults, brokers=(2, 5)))


# -- defects this simulation found, now fixed: each scenario failed on the named invariant ---------------
# (1: a leader restarted within its session led on at its old epoch — fixed by
# ``partition_changes.register_broker``; 2: a restarted broker acted on its stale local metadata —
# fixed by ``ReplicaManager.serving``; 3: ``LeaderEpochCache.end_offset_for`` answered (-1, -1) for
# an epoch older than every entry — now Kafka's answer; 4: a pending ISR change was forgotten on an
# unknown outcome — now kept in the maximal ISR and proposed again). They stay as regression tests.


def _config(seed: int, **overrides: object) -> SimConfig:
    rng = random.Random(seed * 7919 + 104729)
    return replace(SimConfig.random(rng), **overrides)  # type: ignore[arg-type]


def _leader_of(sim: Simulation, partition: int = 0) -> int:
    return sim.controller.state.topics[TOPIC].partitions[partition].leader


def _fast_restart_of_the_leader(seed: int, *, machine: bool) -> None:
    """The leader of p0 crashes and its process is back before ``broker.session.timeout.ms``."""
    config = _config(seed, brokers=3, partitions=1, replication_factor=3, session_timeout_ms=2000,
                     flush_interval_ms=10_000, hw_checkpoint_interval_ms=1000, acks_all_probability=1.0)  # fmt: skip
    sim = Simulation(seed, config)
    if machine:  # look past the high watermark moving back (the process-crash test shows that)
        sim.invariants.disabled.add("hw_never_decreases_within_epoch")
    rng = random.Random(seed)
    sim.run_for(rng.randint(300, 1500))
    leader = _leader_of(sim)
    sim.crash(leader, machine=machine)
    sim.run_for(rng.randint(50, 500))
    sim.restart(leader)
    sim.run_for(2000)
    _converge(sim)


def test_fixed_defect_machine_crash_and_fast_restart_of_the_leader_loses_acks_all_records() -> None:
    """A leader that lost its unflushed tail (machine crash) and restarts within the session timeout
    is still the leader at the same epoch: the registration of its new incarnation neither fences the
    old one nor moves its leaderships or ISR memberships (``QuorumController.handle_registration``,
    ``RegisterBrokerRecord`` applied as unfenced), and the broker takes its roles from its local
    metadata log before registering (``server.py``: ``replicas.on_image_change(None, image)``). It
    then appends new records at the offsets of acknowledged ones, under the same leader epoch, so the
    followers' divergence check (which compares epochs) cannot see the difference: acks=all records
    are lost and the replicas disagree below the high watermark for good."""
    _fast_restart_of_the_leader(6, machine=True)


def test_fixed_defect_process_crash_and_fast_restart_of_the_leader_moves_hw_back() -> None:
    """The same path after a process crash (no data lost): the restarted leader resumes its epoch
    with the high watermark of its last ``replication-offset-checkpoint``, below the one it had
    reached and answered (acks=all, consumers) in that epoch."""
    _fast_restart_of_the_leader(3, machine=False)


def test_slow_restart_of_the_leader_is_safe() -> None:
    """The control case: once the session expired the controller has fenced the old leader and
    elected another; the restarted broker follows it (only with its stale image first, see below)."""
    config = _config(4, brokers=3, partitions=1, replication_factor=3, session_timeout_ms=900)
    sim = Simulation(4, config)
    sim.run_for(800)
    leader = _leader_of(sim)
    sim.crash(leader, machine=True)
    sim.run_until(lambda: _leader_of(sim) != leader, 5000, "a new leader")
    sim.run_for(500)
    sim.restart(leader)
    _converge(sim)


def test_fixed_defect_restarted_broker_leads_by_its_stale_metadata_log() -> None:
    """Even after the session expired (a new leader was elected), the restarted broker first applies
    its local metadata log, where it still leads at the old epoch, and acts as that epoch's leader
    (high watermark from its checkpoint, below what that epoch reached) until it catches up with the
    quorum. Kafka's broker waits for the metadata catch-up before it applies roles. Checked with
    ``stale_leaders``: brokers leading by an outdated image are held to the leader rules."""
    _restart_with_stale_metadata(9)


def _restart_with_stale_metadata(seed: int) -> None:
    config = _config(seed, brokers=3, partitions=1, replication_factor=3, session_timeout_ms=900,
                     hw_checkpoint_interval_ms=1000)  # fmt: skip
    sim = Simulation(seed, config)
    sim.invariants.stale_leaders = True
    sim.run_for(1300)
    leader = _leader_of(sim)
    sim.crash(leader, machine=False)
    sim.run_until(lambda: _leader_of(sim) != leader, 5000, "a new leader")
    sim.cut.update({(leader, CONTROLLER), (CONTROLLER, leader)})  # the quorum is slow to answer it
    sim.restart(leader)
    sim.run_for(300)
    sim.heal()
    _converge(sim)


def test_fixed_defect_follower_never_truncates_when_the_leader_knows_no_older_epoch() -> None:
    """The first leader appends records no follower fetched (it is cut off from its peers), then
    crashes; a follower with an empty log is elected (nothing was committed: legitimate). The old
    leader returns as a follower with last fetched epoch 0; the new leader's epoch cache starts at
    epoch 1, so ``LeaderEpochCache.end_offset_for`` answers (-1, -1) (Kafka answers the requested
    epoch with the start offset of the first later epoch: ``LeaderEpochFileCache.endOffsetFor``),
    and ``ReplicaFetchers._apply`` ignores a diverging epoch whose end offset is negative: no
    truncation, no records, no backoff. ``follower_learns`` then raises the follower's high watermark
    over its own divergent records (replicas disagree below the HW), and it never rejoins the ISR."""
    _election_of_an_empty_follower(2)


def _election_of_an_empty_follower(seed: int) -> None:
    config = _config(seed, brokers=3, partitions=1, replication_factor=3, lag_time_max_ms=1000,
                     produce_interval_ms=(2, 10), acks_all_probability=0.0)  # fmt: skip
    sim = Simulation(seed, config)
    sim.isolate(0, from_controller=False)
    sim.run_for(300)
    sim.crash(0, machine=False)
    sim.heal()
    sim.run_until(lambda: _leader_of(sim) not in (0, -1), 10_000, "a new leader")
    sim.run_for(300)
    sim.restart(0)
    _converge(sim)


def _expand_answer_lost(seed: int) -> Simulation:
    """Broker 1 leaves the ISR of p0 (paused), comes back and catches up; the leader (0) asks to add
    it; as the controller commits that, a network partition cuts the leader off from the controller
    (the answer and the metadata never reach it) and from broker 1 (broker 2 still fetches)."""
    config = _config(seed, brokers=3, partitions=1, replication_factor=3, min_insync_replicas=2,
                     request_timeout_ms=300, session_timeout_ms=3000, lag_time_max_ms=600,
                     acks_all_probability=1.0, drop_probability=0.0, duplicate_probability=0.0)  # fmt: skip
    sim = Simulation(seed, config)
    controller = sim.controller
    handle = controller.handle_alter_partition
    armed = [True]

    def adversary(broker_id: int, broker_epoch: int, changes: list[IsrChange]) -> tuple[int, list]:
        if armed[0] and any(1 in c.new_isr and 1 not in isr() for c in changes):
            armed[0] = False
            sim.trace("adversary: leader 0 cut off from the controller and from broker 1")
            sim.cut.update({(0, CONTROLLER), (CONTROLLER, 0), (0, 1), (1, 0)})
        return handle(broker_id, broker_epoch, changes)

    controller.handle_alter_partition = adversary  # type: ignore[method-assign]
    isr = lambda: sim.controller.state.topics[TOPIC].partitions[0].isr  # noqa: E731
    sim.run_for(300)
    sim.pause(1)
    sim.run_until(lambda: 1 not in isr(), 10_000, "broker 1 out of the ISR")
    sim.resume(1)
    sim.run_until(lambda: not armed[0], 10_000, "the expansion accepted")
    sim.run_for(config.session_timeout_ms + 2000)
    sim.heal()
    _converge(sim)
    return sim


def test_fixed_defect_leader_forgets_an_isr_expansion_whose_answer_was_lost() -> None:
    """``ReplicaManager._send_isr_change`` clears ``pending_isr`` when AlterPartition fails with an
    unknown outcome (request timeout, or the own image not showing the change in time), although the
    controller may have committed the expansion. The leader's high watermark then counts only the
    ISR its stale image shows and acknowledges acks=all records the new (committed) ISR member does
    not have; if that member is elected next (first in replica order), they are lost. Kafka keeps
    the maximal ISR until the controller answers or the metadata shows the outcome. Here: the leader
    acknowledges records with ISR {0, 2} in its view while the controller's ISR is {0, 1, 2}; once
    its session expires the controller elects broker 1 (first live ISR member in replica order),
    which never had them, and broker 2 truncates them: acknowledged acks=all records are lost."""
    _expand_answer_lost(1)


def test_fixed_defect_isr_expansion_forgotten_after_one_lost_answer() -> None:
    """``test_replication_over_a_lossy_network`` seed 1259, no broker fault at all: the leader asks to
    add broker 1; the controller commits ISR [0, 1, 2]; the answer and the metadata push are both
    dropped, the leader notices the broken connection, drops ``pending_isr`` and moves its high
    watermark over the ISR [0, 2] of its image, acknowledging acks=all records broker 1 (in the
    committed ISR, first in replica order after the leader) does not have."""
    _run(1259, Faults(), brokers=(2, 5), duration_ms=3000)


def test_fixed_defect_stale_leader_acknowledges_acks_all_under_a_superseded_epoch() -> None:
    """``test_two_faults_at_once`` seed 1130 (two brokers, RF 2, min.insync.replicas 1): broker 1,
    sole ISR member of p1, machine-crashes (an allowed loss from offset 127); on its restart its
    registration makes it leader again (``elect_leaderless``, a new epoch), but it acts on its local
    metadata log first: leader at the old epoch 2 with ISR [1]. Producers, told it leads, write to
    it; it appends under epoch 2 at offset 127 and acknowledges acks=all (its stale ISR is itself),
    while broker 0 holds another epoch-2 record at offset 127. Same offset, same epoch, different
    records: no divergence check can see it, and the acknowledged record is not on ISR member 0."""
    faults = Faults(pause=True, process_crash=True, machine_crash=True, isolate=True, max_faulty=2)
    _run(1130, faults, brokers=(2, 5))
