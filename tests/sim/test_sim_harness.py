"""The simulation harness itself: determinism, the disk model, and invariants that do catch bugs
(each injected bug below must make a run fail with its seed in the message)."""

from __future__ import annotations

import pytest

from broker.raft import base, replication
from broker.raft.effects import AppendToLog, FlushLog, PersistQuorumState, QuorumStateData, TruncateLog
from broker.raft.invariants import StepInvariants
from broker.raft.log import Entry
from broker.raft.state import QuorumState
from tests.sim.cluster import Cluster, SimulationFailure
from tests.sim.disk import SimDisk
from tests.sim.network import NetworkConfig


def _run(seed: int, voters: int = 3) -> Cluster:
    cluster = Cluster(seed, voters, 1, network=NetworkConfig(1, 10, 0.02, 0.02))
    cluster.start_all()
    cluster.run_until(lambda: cluster.all_reached(15), 60_000, "high watermark 15")
    return cluster


def test_same_seed_same_run() -> None:
    first, second = _run(11), _run(11)
    assert (first.now_ms, first.events) == (second.now_ms, second.events)
    assert first.invariants.committed == second.invariants.committed
    assert first.invariants.leaders_by_epoch == second.invariants.leaders_by_epoch
    assert _run(12).events != first.events or _run(12).now_ms != first.now_ms


def test_disk_loses_unflushed_data_on_crash() -> None:
    disk = SimDisk()
    disk.apply(AppendToLog((Entry(0, 1, b"a"), Entry(1, 1, b"b"))))
    disk.apply(FlushLog(2))
    disk.apply(TruncateLog(1))
    disk.apply(AppendToLog((Entry(1, 2, b"c"), Entry(2, 2, b"d"))))
    disk.apply(PersistQuorumState(QuorumStateData(-1, 2, 1, 0, (1, 2))))
    disk.crash()
    assert [e.payload for e in disk.durable_log] == [b"a", b"b"] == [e.payload for e in disk.volatile_log]
    assert disk.quorum_state is not None  # the quorum-state file is written atomically and durably
    disk.wipe()
    assert disk.quorum_state is None
    assert disk.durable_log == []


def test_failure_names_the_seed() -> None:
    cluster = Cluster(77, 3)
    cluster.start_all()
    with pytest.raises(SimulationFailure, match=r"^seed=77 "):
        cluster.run_until(lambda: False, 10, "the impossible")


def _without_core_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch off the core's own invariant checks, so a test sees what the simulation catches."""
    monkeypatch.setattr(StepInvariants, "after_step", lambda self, now, step: None)


# Each injected bug is caught twice over: by the simulation's invariants (with the core's own checks
# switched off) and, earlier, by the core itself (``broker.raft.invariants``), which stops the node.
CATCHERS = ["simulation", "core"]


@pytest.mark.parametrize("catcher", CATCHERS)
def test_a_vote_not_persisted_before_the_response_is_caught(monkeypatch: pytest.MonkeyPatch, catcher: str) -> None:
    """Injected bug: the vote is recorded in memory but never written to the quorum-state file."""
    original = QuorumState._persist

    def forgetful(self: QuorumState, new_state) -> None:  # type: ignore[no-untyped-def]
        if new_state.name == "voted":
            self.state = new_state
            return
        original(self, new_state)

    monkeypatch.setattr(QuorumState, "_persist", forgetful)
    if catcher == "simulation":
        _without_core_checks(monkeypatch)
        expected = r"seed=5 .*quorum state on disk"
    else:
        expected = r"seed=5 .*invariant violated: replica \d+: the step leaves quorum state .* but persists"
    with pytest.raises(SimulationFailure, match=expected):
        _run(5)


@pytest.mark.parametrize("catcher", CATCHERS)
def test_an_unflushed_follower_append_is_caught(monkeypatch: pytest.MonkeyPatch, catcher: str) -> None:
    """Injected bug: followers append fetched records without asking for an fsync."""
    real_flush = replication.FlushLog
    monkeypatch.setattr(replication, "FlushLog", lambda end: AppendToLog(()))
    if catcher == "simulation":
        _without_core_checks(monkeypatch)
        expected = r"seed=6 .*not durable"
    else:
        expected = r"seed=6 .*invariant violated: replica \d+: the step leaves the log end at \d+ but flushes it at"
    with pytest.raises(SimulationFailure, match=expected):
        _run(6)
    assert real_flush is FlushLog


@pytest.mark.parametrize("catcher", CATCHERS)
def test_a_high_watermark_recomputed_from_scratch_is_caught(monkeypatch: pytest.MonkeyPatch, catcher: str) -> None:
    """Injected bug: a leader sets its high watermark to whatever a majority holds, at once and
    without the current-epoch rule or monotonicity: right after an election it knows nothing of
    the followers and moves the high watermark back, which the invariants must catch."""

    def update(self: QuorumState, high_watermark: int) -> bool:
        moved = high_watermark != self.high_watermark
        self.high_watermark = high_watermark
        return moved

    monkeypatch.setattr(QuorumState, "update_high_watermark", update)

    def no_epoch_rule(self, leader, now_ms: int) -> None:  # type: ignore[no-untyped-def]
        if self.quorum.update_high_watermark(leader.majority_end_offset()):
            self._on_high_watermark(now_ms)

    monkeypatch.setattr(base.CoreBase, "_maybe_advance_leader_high_watermark", no_epoch_rule)
    if catcher == "simulation":
        _without_core_checks(monkeypatch)
    failures = []
    for seed in range(30):
        try:
            _run(seed)
        except SimulationFailure as exc:
            failures.append((seed, str(exc)))
    assert failures
    assert all(message.startswith(f"seed={seed} ") for seed, message in failures)
    if catcher == "core":
        assert any("invariant violated: replica" in message for _, message in failures)
